"""The one op table and its entries: each primitive (the NumPy ufuncs and functions that
lift, the ``nd.image`` ops, the ``nd.io`` decoders, the ``nd.gpu`` ops) defined once."""
