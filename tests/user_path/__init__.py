"""Tests of loopwright, by folder as the package is laid out."""
