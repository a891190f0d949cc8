"""ObjectStore: put a file into a bucket and get it back into another file.

An object store keeps files of any size in a stream, cut into chunks (128 KiB by
default) with a SHA-256 digest of the whole. ``put`` reads the file chunk by chunk
and ``get_file`` writes it chunk by chunk, so neither holds the file in memory;
the digest is checked once the last chunk is read.

Run: ``python examples/objectstore_file.py`` (server at ``$NATS_URL``, default
``nats://127.0.0.1:4222``) or ``python examples/objectstore_file.py --embedded``.
"""

from __future__ import annotations

import hashlib
import pathlib
import tempfile

import jetstream

BUCKET = "example_files"


async def run(url: str, workdir: pathlib.Path) -> None:
    source = workdir / "report.bin"
    # 1 MiB of reproducible bytes, so the digest printed is the same on every run.
    source.write_bytes(b"".join(hashlib.sha256(b"%d" % i).digest() for i in range(32768)))

    async with jetstream.connect(url) as nc:
        js = nc.jetstream()
        store = await js.create_object_store(bucket=BUCKET)
        try:
            info = await store.put_file("reports/2024.bin", source)
            print(f"put {info.name}: {info.size} bytes in {info.chunks} chunks")
            print(f"digest {info.digest}")

            copy = workdir / "copy.bin"
            await store.get_file("reports/2024.bin", copy)
            same = copy.read_bytes() == source.read_bytes()
            print(f"got it back into {copy.name}: {copy.stat().st_size} bytes, identical: {same}")

            await store.put("notes.txt", b"small objects are one chunk")
            for obj in await store.list():
                print(f"listed {obj.name} ({obj.size} bytes)")
        finally:
            await js.delete_object_store(BUCKET)


async def run_in_a_temporary_folder(url: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        await run(url, pathlib.Path(tmp))


if __name__ == "__main__":
    from _runner import main

    main(run_in_a_temporary_folder, __doc__)
