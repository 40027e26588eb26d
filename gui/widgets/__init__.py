"""Small reusable widgets and Qt helpers (compact labels, row tables, label images, colour maps, shortcuts,
docks); they import nothing else from gui/."""
