"""`dprintf link A.elf B.elf ... -o OUT.elf`: the first ELF, its tables replaced by the union of all.

The other inputs contribute only their tables. The same ID with different entries in two inputs is
an error naming both strings and both files, as is one other table key with two values; then no
output is written. Entries that cannot be used (another writer's) are warnings, and kept.

The features' tables link by what the device writes (`metadata.linking.link_check_tables`): those
whose rows are IDs the code writes are merged (IDs, as format strings are); those whose numbers are
compiled into each shader's code are the one input's that has each, and two inputs with different
ones are an error naming both.
"""

from __future__ import annotations

import argparse

from metadata.elf_notes import read_document, with_table
from metadata.linking import FormatRegistry, link_check_tables

from . import EXIT_BAD_INPUT, EXIT_OK, error, read_bytes, warn, write_output


def run(args: argparse.Namespace) -> int:
    registry = FormatRegistry()
    images = [read_bytes(path) for path in args.inputs]
    for path, image in zip(args.inputs, images, strict=True):
        registry.load_elf(image, path)
    for message in registry.unusable:
        warn(message)
    for problem in [str(collision) for collision in registry.collisions] + registry.conflicts:
        error(problem)
    if registry.collisions or registry.conflicts:
        return EXIT_BAD_INPUT
    documents = [
        (path, read_document(image, source=path)) for path, image in zip(args.inputs, images, strict=True)
    ]
    checks, warnings = link_check_tables(documents)
    for message in warnings:
        warn(message)
    write_output(args.output, with_table(images[0], registry.table, source=args.inputs[0], document=checks))
    return EXIT_OK
