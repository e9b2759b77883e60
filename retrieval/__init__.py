"""Corpora, encoders, FAISS and BM25 indexes, and a Search-R1-compatible ``/retrieve`` server. No Django here.

* :mod:`retrieval.corpus` — FlashRAG JSONL rows, streamed and validated; random access by row through offsets.
* :mod:`retrieval.encoders` — sentence-transformers encoders loaded offline (bundled MiniLM by default, E5 / BGE
  prefixes by family), a model-free hashing encoder, and the passage-embedding cache.
* :mod:`retrieval.index` — ``build_index(..., progress=)`` / ``load_index(path)``: flat, IVF(-SQ8), HNSW, BM25.
* :mod:`retrieval.hybrid` — reciprocal-rank fusion of several searchers.
* :mod:`retrieval.api` — ``handle_retrieve(searcher, payload)``: ``POST /retrieve`` as a pure function.
* :mod:`retrieval.server` — ``python -m retrieval.server --index PATH``; :mod:`retrieval.client` — ``RemoteSearcher``.

Nothing heavy is imported here: torch, FAISS and bm25s load when an index or a model is first used.
"""
