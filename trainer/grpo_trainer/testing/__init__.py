"""Offline test fixtures: a tiny vision-language model built in code and a synthetic visual task."""
