"""File > Export report: the dialog, and the PDF laid out by Qt (HTML reports need no Qt: app/report)."""
