"""Dataset adapters: the only Python a benchmark may need beside its YAML.

An adapter is a module named by the benchmark's YAML (``adapter: calidist_tasks.adapters.x``)
with either or both of:

- ``read_file(path) -> list[tuple[str, dict]]``: read a local file in a format that is not the
  Hub's schema, yielding (location such as ``"test.tsv:12"``, raw row);
- ``process_row(row) -> dict | None``: map a raw row to the fields the YAML templates use and an
  integer label; return None to drop a row by the benchmark's rule; raise ValueError naming the
  field for a malformed row.
"""
