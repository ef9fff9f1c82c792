// Owner translation unit of the shared torch precompiled header.
