"""The main window and the binding layer: the only modules that hold both the session and widgets, turning
user intents into session commands and session events into what the views draw."""
