"""Tests of the projections package."""
