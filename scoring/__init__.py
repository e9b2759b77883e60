"""Pure, standard-library-only scoring of search-agent trajectories.

Parsers for every trajectory format (``scoring.formats``), answer metrics (``scoring.metrics``), the rewards of
Search-R1, HiPRAG, AutoSearch, Search-P1 and TIRESRAG-R1 (``scoring.rewards``), judge prompts and verdict parsing
(``scoring.judging``), aggregate metrics (``scoring.aggregates``) and agreement statistics (``scoring.agreement``).

Nothing here imports Django, torch or FAISS, and nothing here calls a model: judge outcomes are inputs.
"""
