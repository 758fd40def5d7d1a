"""Excluded topics for the turns no model reads: the matcher and the built-in vocabularies."""
