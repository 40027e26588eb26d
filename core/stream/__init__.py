"""MindX streams: the .pipeline model and loader, the CPU emulation of its plugins and AIPP, its input."""
