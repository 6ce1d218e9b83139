"""Sans-I/O stream adaptors: bytes or lines in, columnar insert/delete event batches out."""
