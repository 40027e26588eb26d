"""The mask editor's widgets: the painting canvas, its tools and toolbar, and auto-save's timer."""
