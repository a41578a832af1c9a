"""Where tables live: a local path, or a storage URL (``s3://``, ``gs://``, ``abfs://``, ``file://``, ...).

A URL becomes a ``UPath`` (universal_pathlib): the pathlib API over the URL's fsspec filesystem, so
``find_table``, ``read_raw`` and the dask engine's scratch folder use one code for both. A local
path stays a ``pathlib.Path``: the local code path does not change. The filesystem of a scheme
comes from its fsspec package (``s3fs`` for ``s3://``, ``gcsfs`` for ``gs://``, ``adlfs`` for
``abfs://``), installed by the operator; credentials come from that package's usual sources
(environment, config files, instance roles), never from this project's files.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq
from fsspec import get_filesystem_class
from upath import UPath

from pond.core.errors import ConfigError

Location = Path | UPath
_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]+://")


def is_url(value: str | os.PathLike[str] | Location) -> bool:
    """A storage URL (``scheme://...``), not a local path; a one-letter scheme is a Windows drive."""
    if isinstance(value, UPath):
        return not isinstance(value, Path)
    return bool(_SCHEME.match(os.fspath(value)))


def location(value: str | os.PathLike[str] | Location) -> Location:
    """A local path as a Path; a URL as a UPath over its fsspec filesystem (a clear error when the
    scheme's package is missing)."""
    if isinstance(value, (Path, UPath)):
        return value
    if not is_url(value):
        return Path(value)
    try:
        path = UPath(os.fspath(value))
        get_filesystem_class(path.protocol)     # the scheme's package, imported now rather than at first read
        return path
    except (ImportError, ValueError) as exc:
        scheme = os.fspath(value).split("://", 1)[0]
        raise ConfigError(f"cannot open {value}: {str(exc).splitlines()[0][:200]}. Fix: install the fsspec "
                          f"package of '{scheme}://' on this machine and on every Dask worker (s3fs for s3://, "
                          "gcsfs for gs://, adlfs for abfs://), or use a local path") from None


def absolute(path: Location) -> Location:
    """A path another process can use whatever its working directory (a Dask worker's is its own):
    a relative local path made absolute (symlinks kept); a URL as it is."""
    return path if is_url(path) else Path(path).absolute()


def child(base: Location, fs_path: str) -> Location:
    """The location of ``fs_path``, a path that ``base``'s filesystem listed (pyarrow's fragments)."""
    if not is_url(base):
        return Path(fs_path)
    return UPath(fs_path, protocol=base.protocol, **base.storage_options)


def arrow_source(path: Location) -> tuple[str, Any]:
    """What pyarrow reads: (path, filesystem), the filesystem None for a local path."""
    return (path.path, path.fs) if is_url(path) else (os.fspath(path), None)


def pandas_source(path: Location) -> tuple[str | Path, dict[str, Any] | None]:
    """What pandas reads and writes: (path or URL, storage_options), the options None for a local path."""
    return (str(path), dict(path.storage_options)) if is_url(path) else (path, None)


def parquet_file(path: Location) -> pq.ParquetFile:
    """A Parquet file to read lazily (schema, row groups, batches), local or at a URL."""
    source, fs = arrow_source(path)
    return pq.ParquetFile(source if fs is None else fs.open(source, "rb"))


def read_parquet(path: Location) -> pd.DataFrame:
    """``pd.read_parquet`` of a local path or a storage URL."""
    source, options = pandas_source(path)
    return pd.read_parquet(source, storage_options=options)


def write_parquet(df: pd.DataFrame, path: Location, **kwargs: Any) -> None:
    """``df.to_parquet`` (no index) at a local path or a storage URL."""
    target, options = pandas_source(path)
    df.to_parquet(target, index=False, storage_options=options, **kwargs)


def remove_tree(path: Location) -> None:
    """Remove a folder and everything under it, local or remote; a folder already gone is fine."""
    if not is_url(path):
        shutil.rmtree(path, ignore_errors=True)
        return
    try:
        path.fs.rm(path.path, recursive=True)
    except FileNotFoundError:
        pass


_STORAGE_MODULES = ("botocore", "aiobotocore", "s3fs", "gcsfs", "google.auth", "google.api_core", "adlfs", "azure",
                    "fsspec", "aiohttp")


def _chain(exc: BaseException) -> list[BaseException]:
    out: list[BaseException] = []
    while exc is not None and exc not in out:
        out.append(exc)
        exc = exc.__cause__
    return out


def _from_storage(exc: BaseException) -> bool:
    return any(k.__module__ == m or k.__module__.startswith(m + ".") for k in type(exc).__mro__
               for m in _STORAGE_MODULES)


def storage_failure(exc: BaseException) -> str | None:
    """What went wrong reaching a storage URL, and how to fix it, when ``exc`` comes from an fsspec
    filesystem's client (no credentials, access denied, endpoint unreachable); None for any other
    error. The packages are recognised by name: a scheme's package need not be installed."""
    if not any(_from_storage(e) for e in _chain(exc)):   # s3fs raises PermissionError from botocore's ClientError
        return None
    text = str(exc).strip()
    first = text.splitlines()[0][:200] if text else type(exc).__name__
    return (f"storage unreachable ({type(exc).__name__}: {first}). Fix: check the URL's bucket and the "
            "credentials its fsspec package finds (for s3://: AWS_PROFILE or AWS_ACCESS_KEY_ID / "
            "AWS_SECRET_ACCESS_KEY, AWS_ENDPOINT_URL for an S3-compatible store), on this machine and on "
            "every Dask worker")
