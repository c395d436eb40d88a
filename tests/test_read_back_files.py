"""Every file bake-plan reads back goes through one reader: a device, a FIFO or a directory is
refused unread (never read until memory runs out, never waited on forever), a file past 64 MiB is
refused, and ``diff`` reads its sides with the same depth bound and refuses what holds no record."""

from __future__ import annotations

import json
import os

import pytest
from test_errors import assert_one_line_error

from bake.documents import MAX_BYTES, DocumentError, read_bytes, read_json

NOT_REGULAR = "is not a regular file (a character device)"


def test_the_reader_refuses_devices_fifos_directories_and_large_files(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # nobody writes: a blocking open would wait forever
    for path, kind in (("/dev/zero", "a character device"), (fifo, "a FIFO"), (tmp_path, "a directory")):
        with pytest.raises(DocumentError) as err:
            read_json(path)
        assert str(err.value) == f"is not a regular file ({kind})"
    big = tmp_path / "big.json"
    with open(big, "wb") as handle:  # sparse: no 64 MiB written
        handle.truncate(MAX_BYTES + 1)
    with pytest.raises(DocumentError) as err:
        read_bytes(big)
    assert str(err.value) == "larger than 64 MiB: not a file bake-plan reads"
    assert read_bytes("/dev/null") == b""  # `--config /dev/null`: no configuration
    exact = tmp_path / "exact"
    exact.write_bytes(b"{}")
    assert read_json(exact) == {}


@pytest.mark.parametrize("args, where", [
    (("--platform", "linux/amd64", "--from-registry", "--parent-report", "/dev/zero"), "--parent-report: /dev/zero"),
    (("--metadata-bake-file", "/dev/zero"), "--metadata-bake-file /dev/zero"),
])
def test_plan_refuses_a_device_as_a_report_it_reads(cli, tmp_path, args, where):
    proc = cli("plan", "--target", "jax", "-o", "plan.hcl", *args, cwd=tmp_path)
    assert_one_line_error(proc, cwd=tmp_path)
    assert proc.stderr == f"bake-plan: error: {where}: {NOT_REGULAR}\n"


def test_a_fifo_metadata_bake_file_is_refused_not_waited_on(cli, tmp_path):
    fifo = tmp_path.parent / f"{tmp_path.name}-meta.fifo"
    os.mkfifo(fifo)
    proc = cli("plan", "--target", "jax", "-o", "plan.hcl", "--metadata-bake-file", str(fifo), cwd=tmp_path)
    assert_one_line_error(proc, cwd=tmp_path)
    assert proc.stderr == f"bake-plan: error: --metadata-bake-file {fifo}: is not a regular file (a FIFO)\n"


@pytest.mark.parametrize("command", [("publish", "--dry-run"), ("record",)])
def test_a_device_sitrep_is_not_a_regular_file(cli, tmp_path, command):
    proc = cli(*command, "--target", "jax", "--sitrep", "/dev/zero", cwd=tmp_path)
    assert_one_line_error(proc)
    assert proc.stderr == f"bake-plan: error: --sitrep /dev/zero: {NOT_REGULAR}\n"


RECORD = {"schema": "bake-plan.nightly-record/1", "target": "jax", "arch": "amd64", "input_digest": "sha256:" + "a" * 64,
          "pins": None, "sources": {}}


def _deep_record(levels: int) -> str:
    head = json.dumps(RECORD)[:-1]
    return head + ', "base_images": ' + "[" * levels + "]" * levels + "}"


@pytest.mark.parametrize("text, why", [
    ("[" * 100_000, "nested too deeply (more than 100 levels of arrays or objects within each other)"),
    (_deep_record(5000), "nested too deeply (more than 100 levels of arrays or objects within each other)"),
    ("[]", "not a bake-plan plan or nightly record (an empty list)"),
    ('{"schema": "bake-plan.nightly-record/1"}',
     "not a bake-plan plan or nightly record (a record without 'target', 'arch', 'input_digest')"),
    (json.dumps([RECORD, {**RECORD, "arch": None}]),
     "not a bake-plan plan or nightly record (item 1: a record without 'arch')"),
    ('{"target": {"jax": 1}}', "not a bake-plan plan or nightly record "
                               "(a plan's 'target' block holding a target that is not a table)"),
    (json.dumps([RECORD, {**RECORD, "pins": {"numpy": "1.0"}}]),
     "not a bake-plan plan or nightly record (items 0 and 1 are both the record of target 'jax' on 'amd64')"),
])
def test_diff_refuses_deep_empty_or_partial_sides(cli, tmp_path, text, why):
    side = tmp_path / "side.json"
    side.write_text(text)
    proc = cli("diff", "--target", "jax", "--from", str(side), "--to", str(side), cwd=tmp_path)
    assert_one_line_error(proc)
    assert proc.stderr == f"bake-plan: error: --from {side}: {why}\n"


@pytest.mark.parametrize("text, why", [
    ('{"a": 1, "a": 2}', "not JSON bake-plan reads: an object names 'a' twice"),
    ('[{"x": {"k": 1, "k": 1}}]', "not JSON bake-plan reads: an object names 'k' twice"),
    ('{"duration_s": NaN}', "not JSON: NaN is not a JSON number"),
    ('[-Infinity]', "not JSON: -Infinity is not a JSON number"),
    ('{"size_bytes": 1e999}', "not JSON bake-plan reads: the number 1e999 is out of range"),
    ('[-2.5E+400]', "not JSON bake-plan reads: the number -2.5E+400 is out of range"),
])
def test_the_json_reader_refuses_a_key_twice_and_numbers_json_has_not(tmp_path, text, why):
    """Python's json keeps the last of two values of a key, another reader the first: a file read
    back must not mean two things."""
    path = tmp_path / "doc.json"
    path.write_text(text)
    with pytest.raises(DocumentError) as err:
        read_json(path)
    assert str(err.value) == why


def test_a_sitrep_that_names_a_target_twice_is_refused_in_one_line(cli, tmp_path):
    sitrep = tmp_path / "sitrep.json"
    sitrep.write_text('{"schema": 1, "targets": {"jax": {"status": "built"}, "jax": {"status": "failed"}}}')
    proc = cli("publish", "--dry-run", "--target", "jax", "--sitrep", str(sitrep), cwd=tmp_path)
    assert_one_line_error(proc)
    assert "an object names 'jax' twice" in proc.stderr and str(sitrep) in proc.stderr, proc.stderr


def test_diff_reads_a_record_and_refuses_a_device(cli, tmp_path):
    side = tmp_path / "side.json"
    side.write_text(json.dumps(RECORD))
    proc = cli("diff", "--target", "jax", "--from", str(side), "--to", str(side), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "jax" in proc.stdout and "unchanged" in proc.stdout
    proc = cli("diff", "--target", "jax", "--from", "/dev/zero", cwd=tmp_path)
    assert_one_line_error(proc)
    assert proc.stderr == f"bake-plan: error: --from /dev/zero: {NOT_REGULAR}\n"


def test_a_record_read_from_the_registry_is_bounded_in_depth_and_size():
    """A record annotation the registry hands back is untrusted: a deep one, or a gzip one that
    expands past 64 MiB (a few KB sent), is refused in one line, never held or recursed into."""
    import base64
    import gzip

    from bake.errors import RecordError
    from bake.run.record import ANNOTATION, ANNOTATION_GZ, record_from_annotations

    with pytest.raises(RecordError, match="nested too deeply"):
        record_from_annotations({ANNOTATION: "[" * 100_000}, "r/x:record")
    bomb = base64.b64encode(gzip.compress(b" " * (MAX_BYTES + 10), compresslevel=9)).decode()
    assert len(bomb) < 200_000
    with pytest.raises(RecordError) as err:
        record_from_annotations({ANNOTATION_GZ: bomb}, "r/x:record")
    assert str(err.value) == "r/x:record: the record expands past 64 MiB: not a bake-plan record"
    packed = base64.b64encode(gzip.compress(json.dumps(RECORD).encode())).decode()
    assert record_from_annotations({ANNOTATION_GZ: packed}, "r/x:record") == RECORD
    with pytest.raises(RecordError, match="not readable JSON"):
        record_from_annotations({ANNOTATION_GZ: packed[:40]}, "r/x:record")


def test_a_fifo_named_sitrep_json_in_a_directory_is_refused_not_passed_over(cli, tmp_path):
    reports = tmp_path / "reports" / "amd64"
    reports.mkdir(parents=True)
    os.mkfifo(reports / "sitrep.json")
    proc = cli("publish", "--target", "jax", "--dry-run", "--sitrep", "reports", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr == "bake-plan: error: --sitrep reports: reports/amd64/sitrep.json: is not a regular file (a FIFO)\n"


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_a_sources_manifest_that_is_no_regular_file_is_named_so(cli, tmp_path, kind):
    """``--sources`` goes through the same check as every path bake-plan reads: a FIFO or a
    device is "not a regular file", not "no such file"."""
    work = tmp_path / "work"
    work.mkdir()
    if kind == "fifo":
        path = tmp_path / "fifo"
        os.mkfifo(path)
        why = "is not a regular file (a FIFO)"
    else:
        path, why = "/dev/zero", NOT_REGULAR
    proc = cli("plan", "--target", "jax", "--sources", str(path), "-o", "plan.hcl", cwd=work)
    assert_one_line_error(proc, cwd=work)
    assert f"--sources {path}: {why}" in proc.stderr, proc.stderr


def test_a_large_sitrep_is_refused_as_every_large_file_is(cli, tmp_path):
    big = tmp_path / "sitrep.json"
    with open(big, "wb") as handle:  # sparse: no 64 MiB written
        handle.truncate(MAX_BYTES + 1)
    proc = cli("publish", "--dry-run", "--target", "jax", "--sitrep", str(big), cwd=tmp_path)
    assert_one_line_error(proc)
    assert proc.stderr == f"bake-plan: error: --sitrep {big}: larger than 64 MiB: not a file bake-plan reads\n"
