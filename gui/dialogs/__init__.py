"""Modal dialogs: choosing a backend or model, comparing runs, exporting."""
