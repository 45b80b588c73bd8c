"""Tests of warren."""
