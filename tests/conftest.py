"""Shared by every suite: puts tests/ on sys.path (pytest's rootdir conftest) so `fakes` imports."""
