"""Qt item models shared by the views and docks."""
