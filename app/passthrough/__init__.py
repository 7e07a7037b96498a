"""The endpoints passed through to a model's back end as they are: embeddings, legacy completions (with a
fill-in-the-middle ``suffix``), rerank, audio, and the back end's own tokenizer."""
