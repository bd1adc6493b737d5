"""Verification: ``inspect``, ``inspect --verify`` (also on Apache Beam) and the manifests of
verified files."""
