"""The one recorder: symbolic values that record NumPy operators, ufuncs, array
functions, ndarray methods, indexing and nbdata primitives into one graph, and the
user-function conventions every consumer of those graphs shares."""
