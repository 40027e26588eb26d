"""SegScope's cache of decoded inputs (images' ROIs, truth masks' ROIs) and the int8 models it makes.

`settings` says where the cache lives and whether it is on (the platform's user cache folder, an
environment variable, or the command line); `store` keeps verified entries under a size cap; `decoded`
turns a file's content, the decoder's settings and an ROI into an entry, so a hit is bit-identical to a
decode.
"""
