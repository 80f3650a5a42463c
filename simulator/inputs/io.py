"""Scenario tables in, prediction tables out: CSV or Parquet, in blocks, through pyarrow.

The format follows the file's suffix (`.csv`, `.parquet`); any other suffix is refused with
a message that names the flag. Reading and writing go block by block, so a table of
millions of rows never sits in memory whole. pyarrow (a dependency of Streamlit) is
imported here, and only here, when a table is read or written.
"""

from __future__ import annotations

import csv
import os
import secrets
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from simulator.errors import InputError

FORMATS = {".csv": "csv", ".parquet": "parquet"}
"""File suffixes a table may have, and the format each means."""
MAX_COLUMNS = 16_384
"""Most columns a table's header may hold: a spreadsheet's widest row (Excel's XFD), so
any export fits. A reader builds an array per column, blank ones too (a blank column is
dropped only once read, to refuse one that holds data): one row with a million trailing
commas took 4.7 GB and 43 to 88 s before this bound, and is refused in about a second."""


def csv_frame(data: bytes, source: str, **read_csv):
    """CSV bytes (UTF-8, a byte-order mark allowed) as a DataFrame with stripped column
    names, refusing what pandas would read wrong without a word: a row with more or fewer
    fields than the header (pandas takes the first field of rows one field longer as the
    index, shifting the rest into the wrong columns) and a name given twice (pandas renames
    the second). Blank lines are skipped, as pandas skips them, so the rows an error names
    (the header is row 1) are the ones pandas numbers. `read_csv` goes to pandas."""
    import io

    import pandas as pd

    try:
        text = data.decode("utf-8-sig")
        lines = [r for r in csv.reader(io.StringIO(text)) if r]
    except (UnicodeDecodeError, csv.Error) as exc:
        raise InputError(f"not a readable CSV table ({exc})", file=source) from None
    if not lines:
        raise InputError("is empty", file=source)
    names = [h.strip() for h in lines[0]]
    _check_width(names, source)
    _check_separator(names, source)
    for i, col in enumerate(names):
        if col in names[:i]:
            raise InputError("column appears twice in the header", file=source, row=1, field=col)
    for i, row in enumerate(lines[1:], start=2):
        if len(row) != len(names):
            raise InputError(
                f"has {len(row)} field{'s' * (len(row) != 1)} where the header names {len(names)}",
                file=source,
                row=i,
            )
    try:
        df = pd.read_csv(io.StringIO(text), index_col=False, **read_csv)
    except (pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        raise InputError(f"not a readable CSV table ({exc})", file=source) from None
    if len(df.columns) != len(names):
        raise InputError("not a readable CSV table (its header and rows disagree)", file=source)
    df.columns = names
    return df


def table_format(path: str, flag: str) -> str:
    """'csv' or 'parquet' from the suffix of `path`; anything else is refused."""
    suffix = Path(path).suffix.lower()
    if suffix not in FORMATS:
        given = f"ends in '{suffix}'" if suffix else "has no suffix"
        raise InputError(
            f"'{path}' {given}; give a file ending in {' or '.join(FORMATS)}", field=flag
        )
    return FORMATS[suffix]


def check_file(path: str, flag: str) -> None:
    """Refuse an input path that is missing or not a regular file, naming the flag."""
    p = Path(path)
    if p.is_dir():
        raise InputError(f"'{path}' is a folder; give a file", field=flag)
    if not p.exists():
        raise InputError("file not found", file=path, field=flag)
    if not p.is_file():
        raise InputError(f"'{path}' is not a regular file", field=flag)


def _header(path: str) -> list[str]:
    """The CSV header's names, stripped; a name given twice is refused."""
    try:
        with open(path, newline="", encoding="utf-8-sig") as fh:
            header = next(csv.reader(fh), None)
    except (UnicodeDecodeError, csv.Error) as exc:
        raise InputError(f"not a readable CSV file ({exc})", file=path) from None
    if not header:
        raise InputError("not a readable CSV file (it is empty)", file=path)
    names = [name.strip() for name in header]
    _check_width(names, path)
    _check_separator(names, path)
    _unique(names, path)
    return names


def _check_width(names: list[str], source: str) -> None:
    """Refuse a header of more than MAX_COLUMNS columns before any column is built."""
    if len(names) > MAX_COLUMNS:
        blank = sum(1 for name in names if not name)
        which = f", {blank:,} of them blank" if blank else ""
        raise InputError(
            f"the header has {len(names):,} columns{which}, more than a spreadsheet row holds "
            f"({MAX_COLUMNS:,}); a scenario table needs a few dozen: delete the others",
            file=source,
            row=1,
        )


def _check_separator(names: list[str], source: str) -> None:
    """Refuse a header that is one name holding semicolons or tabs: a table saved with
    another separator (spreadsheets in many locales write ';'), which would otherwise
    read as one column of unknown name."""
    if len(names) != 1:
        return
    for sep, word in ((";", "semicolons"), ("\t", "tabs")):
        if sep in names[0]:
            raise InputError(
                f"the header's names are separated by {word}; a CSV table here is separated "
                "by commas (save it again with ',' between fields and '.' in numbers)",
                file=source,
                row=1,
            )


def _unique(names: list[str], path: str) -> None:
    seen: dict[str, int] = {}
    for position, name in enumerate(names, start=1):
        if name and name in seen:
            raise InputError(
                f"column '{name}' appears twice (columns {seen[name]} and {position}); keep one",
                file=path,
                field=name,
            )
        seen[name] = position


def table_columns(path: str, flag: str = "--in") -> list[str]:
    """The column names of the table at `path`, stripped; blank names stay blank."""
    fmt = table_format(path, flag)
    check_file(path, flag)
    if fmt == "csv":
        return _header(path)
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        names = [str(n).strip() for n in pq.read_schema(path).names]
    except (pa.ArrowException, OSError) as exc:
        raise InputError(f"not a readable Parquet file ({exc})", file=path) from None
    _check_width(names, path)
    _unique(names, path)
    return names


def _frame(table, path: str):
    """A block read as text to a pandas DataFrame: numeric columns as float64 where every
    cell parses (else text, so validation names the bad cell), scenario text columns as
    Categoricals; blank-header columns dropped when empty, refused when they hold data."""
    import numpy as np
    import pandas as pd
    import pyarrow as pa
    import pyarrow.compute as pc

    from simulator.inputs.scenarios import NUMERIC_COLUMNS, TEXT_COLUMNS

    columns = {}
    pairs = zip(table.column_names, table.columns, strict=True)
    for position, (name, col) in enumerate(pairs, start=1):
        if pa.types.is_binary(col.type) or pa.types.is_large_binary(col.type):
            try:  # text some writers store without marking it as UTF-8
                col = pc.cast(col, pa.string())
            except pa.ArrowInvalid:
                raise InputError(
                    "holds bytes that are not UTF-8 text", file=path, field=name or None
                ) from None
        if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
            col = pc.if_else(pc.equal(pc.utf8_trim_whitespace(col), ""), None, col)
        if not name:
            if col.null_count == len(col):
                continue
            raise InputError(
                f"column {position} has a blank header; name it or delete it", file=path
            )
        if name in NUMERIC_COLUMNS and pa.types.is_floating(col.type):
            array = col.to_numpy()
            if np.isnan(array[~np.asarray(pc.is_null(col))]).any():
                # 'nan' typed in a cell: validation refuses it as text
                col = pc.if_else(pc.is_nan(col), pa.scalar("nan"), pc.cast(col, pa.string()))
                columns[name] = col.to_pandas()
            else:
                columns[name] = array
            continue
        if name in NUMERIC_COLUMNS and pa.types.is_string(col.type):
            try:
                values = pc.cast(col, pa.float64())
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                values = None
            if values is not None:
                array = values.to_numpy(zero_copy_only=False)
                if not np.isnan(array[~np.asarray(pc.is_null(values))]).any():
                    columns[name] = array
                    continue
            columns[name] = col.to_pandas()
        elif name in TEXT_COLUMNS and pa.types.is_string(col.type):
            columns[name] = col.dictionary_encode().to_pandas()
        else:
            columns[name] = col.to_pandas()
    return pd.DataFrame(columns, copy=False)


def read_blocks(path: str, rows: int, flag: str = "--in") -> Iterator:
    """The table at `path` (CSV or Parquet, by suffix) as DataFrames of at most `rows` rows,
    with stripped column names; CSV cells are text until `_frame` parses them."""
    import pyarrow as pa

    fmt = table_format(path, flag)
    check_file(path, flag)
    if fmt == "parquet":
        import pyarrow.parquet as pq

        try:
            parquet = pq.ParquetFile(path)
        except (pa.ArrowException, OSError) as exc:
            raise InputError(f"not a readable Parquet file ({exc})", file=path) from None
        names = [str(n).strip() for n in parquet.schema_arrow.names]
        _check_width(names, path)
        _unique(names, path)
        if parquet.metadata.num_rows == 0:
            # No rows (or no columns): one empty table, refused as the same CSV is.
            yield _frame(parquet.schema_arrow.empty_table().rename_columns(names), path)
            return
        for batch in parquet.iter_batches(batch_size=rows):
            yield _frame(pa.Table.from_batches([batch]).rename_columns(names), path)
        return
    names = _header(path)
    raw = _header_raw(path)
    done = 0
    try:
        # Numbers and scenario text parsed by pyarrow as they are read; a cell that is
        # not a number stops this and the rest is read as text, for validation to name.
        for frame in _csv_blocks(path, raw, names, rows, typed=True):
            done += len(frame)
            yield frame
        return
    except pa.ArrowInvalid:
        pass
    for frame in _csv_blocks(path, raw, names, rows, typed=False, skip=done):
        yield frame


def _csv_blocks(path, raw, names, rows, *, typed: bool, skip: int = 0):
    import pyarrow as pa
    import pyarrow.csv as pcsv

    from simulator.inputs.scenarios import NUMERIC_COLUMNS, TEXT_COLUMNS

    types = {}
    for name, stripped in zip(raw, names, strict=True):
        if typed and stripped in NUMERIC_COLUMNS:
            types[name] = pa.float64()
        elif typed and stripped in TEXT_COLUMNS:
            types[name] = pa.dictionary(pa.int32(), pa.string())
        else:
            types[name] = pa.string()
    try:
        reader = pcsv.open_csv(
            path,
            read_options=pcsv.ReadOptions(block_size=1 << 22, use_threads=True),
            convert_options=pcsv.ConvertOptions(
                column_types=types,
                strings_can_be_null=True,
                null_values=[""],
                quoted_strings_can_be_null=True,
            ),
        )
    except pa.ArrowInvalid as exc:
        if typed:
            raise
        raise InputError(f"not a readable CSV file ({exc})", file=path) from None
    pending, count, yielded = [], 0, False

    def batches():
        try:
            yield from reader
        except pa.ArrowInvalid as exc:
            if typed and "conversion error" in str(exc).lower():
                raise
            raise InputError(f"not a readable CSV file ({exc})", file=path) from None

    for batch in batches():
        if skip:
            drop = min(skip, batch.num_rows)
            batch, skip = batch.slice(drop), skip - drop
            if not batch.num_rows:
                continue
        pending.append(batch)
        count += batch.num_rows
        while count >= rows:
            table = pa.Table.from_batches(pending).rename_columns(names)
            yield _frame(table.slice(0, rows), path)
            yielded = True
            rest = table.slice(rows)
            pending, count = rest.to_batches(), rest.num_rows
    # A header and no rows is one empty table; rows that filled the last block exactly
    # leave nothing to add.
    if count or not yielded:
        table = pa.Table.from_batches(pending, schema=reader.schema).rename_columns(names)
        if table.num_rows or not skip:
            yield _frame(table, path)


def _header_raw(path: str) -> list[str]:
    with open(path, newline="", encoding="utf-8-sig") as fh:
        return next(csv.reader(fh))


def probe_folder(folder) -> str | None:
    """Why no new file can be made in `folder` (the system's words), or None. A file is
    made and removed: `os.access` says yes to root in /proc or on a read-only mount."""
    try:
        fd, tmp = tempfile.mkstemp(prefix=".specplan-probe.", dir=folder)
    except OSError as exc:
        return exc.strerror or str(exc)
    os.close(fd)
    os.unlink(tmp)
    return None


def _file_mode() -> int:
    """Permissions a plain `open` would give a new file: 0o666 less the umask."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


@contextmanager
def atomic_path(out: str) -> Iterator[str]:
    """A temporary path beside `out`, renamed to `out` when the block exits normally and
    removed otherwise: never a half-written file. The file gets the permissions of one
    opened normally (mkstemp's are 0600). Folders it makes for `out` are removed again
    when nothing is written: refused input leaves no trace."""
    target = Path(out)
    made = [p for p in (target.parent, *target.parent.parents) if not p.exists()]
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = None
    try:
        while tmp is None:  # the name is bound before the file exists (see _claim)
            tmp = str(target.parent / f".{target.name}.{secrets.token_hex(4)}")
            tmp = _claim(tmp)
        yield tmp
        os.chmod(tmp, _file_mode())
        os.replace(tmp, target)
    except BaseException:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        for folder in made:  # deepest first; one something else wrote into stays
            with suppress(OSError):
                folder.rmdir()
        raise


def _claim(path: str) -> str | None:
    """Create `path` empty and exclusively; None if it exists. The caller binds the name
    first, so a SIGTERM at any instant leaves no file or one its cleanup knows (with
    mkstemp a signal between its creating the file and returning the name left the file
    behind: tests/simulator/test_cli.py::test_sigterm_leaves_no_temporary_file)."""
    try:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    except FileExistsError:
        return None
    return path


def _cheap_to_format(table):
    """Float columns of whole numbers as integers: pyarrow writes the same text, and a
    float's shortest text costs about four times an integer's to write. A column whose
    first values are not whole is left as it is without reading the rest."""
    import numpy as np
    import pyarrow as pa

    columns = []
    for field, col in zip(table.schema, table.columns, strict=True):
        if pa.types.is_float64(field.type) and len(col):
            values = col.to_numpy()
            head = values[:_HEAD]
            if np.all(np.isnan(head) | (head == np.floor(head))):
                col = _as_integers(col, values)
        columns.append(col)
    return pa.table(columns, names=table.column_names)


_HEAD = 64
"""Values `_cheap_to_format` looks at before it reads a whole column."""


def _as_integers(col, values):
    """`col` as int64 when every value is a whole number below 2^53 (nulls kept), else
    as it is. A NaN that is not null (pyarrow writes 'nan') or a negative zero keeps it
    a float."""
    import numpy as np
    import pyarrow as pa

    missing = np.isnan(values)
    if col.null_count != missing.sum():
        return col
    finite = values[~missing]
    if (
        np.all(np.abs(finite) < 2.0**53)
        and np.all(finite == np.floor(finite))
        and not np.any(np.signbit(finite) & (finite == 0))
    ):
        return pa.array(np.where(missing, 0, values).astype(np.int64), mask=missing)
    return col


CSV_ROWS = 16_384
"""Rows turned into CSV text at a time: a block of text is about 1 KB a row."""


def writer_threads() -> int:
    """Threads that format CSV text: the CPUs this process may use, at most 4."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cpus = os.cpu_count() or 1
    return max(1, min(cpus, 4))


class TableWriter:
    """Writes DataFrames block by block to an open temporary path as CSV or Parquet, in
    the order given, on threads of its own: `write` returns once the block is queued.

    CSV: each block is cut into pieces of `CSV_ROWS` rows, each turned into text on one
    of `threads` threads (pyarrow formats without holding the GIL, and a float's shortest
    text is most of a CSV write), and the texts are appended in order; the first block's
    columns are the header, and a later block must have the same ones. Each piece's text
    follows its own values, so a column of whole numbers in one piece and fractions in
    the next writes each as it is. Parquet: one thread converts and writes each block in
    order; the first block's columns and types are the file's. At most `threads + 1`
    pieces wait, so memory stays bounded. `on_written(rows)`, when given, is called with
    the rows written so far after each piece. An error raised on a thread is raised by
    the next `write` or by `close`, and nothing queued after it is written.
    """

    def __init__(self, path: str, fmt: str, threads: int | None = None, on_written=None):
        from concurrent.futures import ThreadPoolExecutor

        self.path, self.fmt = path, fmt
        self.rows = 0
        self._on_written = on_written
        self._names = None
        self._header = True
        self._schema = None
        self._parquet = None
        workers = (threads or writer_threads()) if fmt == "csv" else 1
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="table-writer")
        self._limit = workers + 1
        self._pending = []
        self._failed = False
        # Open for the writer's life, closed by close().
        self._file = open(path, "wb") if fmt == "csv" else None  # noqa: SIM115

    def _table(self, df):
        import pyarrow as pa

        table = pa.Table.from_pandas(df, preserve_index=False)
        if self.fmt == "csv":
            table = _cheap_to_format(table)
        fields = []
        for field in table.schema:
            kind = field.type
            if pa.types.is_dictionary(kind):
                kind = pa.string() if self.fmt == "csv" else pa.dictionary(pa.int32(), pa.string())
            elif pa.types.is_large_string(kind) or pa.types.is_null(kind):
                kind = pa.string()
            fields.append(pa.field(field.name, kind))
        return table.cast(pa.schema(fields))

    def _csv_text(self, df, header: bool):
        import pyarrow as pa
        import pyarrow.compute as pc
        import pyarrow.csv as pcsv

        sink = pa.BufferOutputStream()
        table = self._table(df)
        quoting = "needed"
        if table.num_columns == 1:
            # One column: an empty cell would be a blank line, which CSV readers skip
            # (pandas and csv_frame alike). A quoted empty text keeps the row.
            text = pc.fill_null(pc.cast(table.column(0), pa.string()), "")
            table, quoting = pa.table([text], names=table.column_names), "all_valid"
        options = pcsv.WriteOptions(include_header=header, quoting_style=quoting)
        pcsv.write_csv(table, sink, write_options=options)
        return sink.getvalue(), len(df)

    def _write_parquet(self, df) -> int:
        import pyarrow as pa
        import pyarrow.parquet as pq

        table = self._table(df)
        if self._parquet is None:
            self._schema = table.schema
            # Dictionary pages only for text: trying them on float columns doubles the
            # time of a write and saves nothing.
            text = [f.name for f in self._schema if pa.types.is_dictionary(f.type)]
            self._parquet = pq.ParquetWriter(self.path, self._schema, use_dictionary=text)
        else:
            table = table.cast(self._schema)
        self._parquet.write_table(table)
        return len(df)

    def write(self, df) -> None:
        if self._failed:
            raise RuntimeError("an earlier block failed to write; the file is incomplete")
        names = [str(c) for c in df.columns]
        if self._names is None:
            self._names = names
        elif names != self._names:
            raise ValueError(f"a block's columns {names} differ from the first's {self._names}")
        if self.fmt == "csv":
            for start in range(0, max(len(df), 1), CSV_ROWS):
                self._queue(self._csv_text, df.iloc[start : start + CSV_ROWS], self._header)
                self._header = False
        else:
            self._queue(self._write_parquet, df)

    def _queue(self, work, *args) -> None:
        self._pending.append(self._pool.submit(work, *args))
        while len(self._pending) >= self._limit or (self._pending and self._pending[0].done()):
            self._finish(self._pending.pop(0))

    def _finish(self, job) -> None:
        try:
            done = job.result()
        except BaseException:
            # The file now lacks this block: nothing queued after it may be written.
            for later in self._pending:
                later.cancel()
            self._pending.clear()
            self._failed = True
            raise
        if self.fmt == "csv":
            text, rows = done
            self._file.write(text)
        else:
            rows = done
        self.rows += rows
        if self._on_written is not None:
            self._on_written(self.rows)

    def close(self) -> None:
        """Write what is queued and close the file; raises the first error a block met
        (the blocks after it are dropped)."""
        try:
            while self._pending:
                self._finish(self._pending.pop(0))
        finally:
            for job in self._pending:
                job.cancel()
            self._pool.shutdown(wait=True)
            if self._parquet is not None:
                self._parquet.close()
            if self._file is not None:
                self._file.close()
