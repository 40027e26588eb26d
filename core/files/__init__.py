"""Reading files SegScope did not write (images, headers, JSON) and writing files safely and as a unit."""
