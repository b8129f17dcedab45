"""Tests of the hivestream package."""
