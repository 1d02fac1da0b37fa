"""Engine-agnostic core of tdescope: pure Python, no Qt, no plugin imports."""
