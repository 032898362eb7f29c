"""Key terms: typed values read from a document's clauses, with their proof."""
