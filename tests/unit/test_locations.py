"""Where eos keeps files outside its stores (eos/_fs.py): local paths, and URIs in either form Spark and
pyarrow write them (a checkpoint Spark hands out is `file:/path`, Hadoop's form)."""

from __future__ import annotations

from pyarrow import fs

from eos._fs import filesystem, is_uri


def test_a_uri_of_either_form_is_a_uri_and_a_path_is_not():
    for uri in ("s3://bucket/ckpt", "file:///tmp/ckpt", "file:/tmp/ckpt", "hdfs://nn:8020/c", "gs://b/p"):
        assert is_uri(uri), uri
    for path in ("/tmp/ckpt", "ckpt/eos-ledger", "C:\\ckpt", "./a:b"):
        assert not is_uri(path), path


def test_hadoops_file_uri_is_the_local_path_not_a_folder_named_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    files, path = filesystem(f"file:{tmp_path}/ckpt/eos-ledger")
    assert isinstance(files, fs.LocalFileSystem)
    assert path == f"{tmp_path}/ckpt/eos-ledger"  # not <cwd>/file:/...
    files, path = filesystem("relative/eos-ledger")
    assert path == f"{tmp_path}/relative/eos-ledger"
