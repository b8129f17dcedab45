"""Harnesses, fixtures and fakes the tests share."""
