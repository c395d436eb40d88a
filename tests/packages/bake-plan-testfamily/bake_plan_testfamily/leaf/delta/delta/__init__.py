"""delta: the editable source of the test family."""
