"""File sources, decoders and writers."""
