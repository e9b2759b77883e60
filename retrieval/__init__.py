"""Corpora, encoders, FAISS and BM25 indexes, and a Search-R1-compatible ``/retrieve`` server. No Django here."""
