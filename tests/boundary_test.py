#!/usr/bin/python3
"""The boundaries of src/ that the build alone does not enforce (docs/architecture.md, "Layers").

1. ONNX Runtime's headers (onnxruntime_*) are included only in src/ort/ — directly, or through a
   header of ours that includes them. The one exception is src/bench/'s sources (not its headers):
   the benchmarks' bare-ORT baselines, linked by cli/ and tests/ only, never into libebb.
2. cli/ and server/ include nothing of src/ but the port layer's port.h, and (cli/ only) the
   headers of src/bench/ and src/ocr/bare_ocr.h (the OCR benchmark's baseline); everything else
   they reach through the public headers (include/ebb/).
3. No circle of includes between the folders of src/, and no header name used in two of them
   (src/ includes its headers by bare name: "file_access.h").

Usage: boundary_test.py <repository root>. Exits 1 with one line per violation.
"""
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^">]+)[">]', re.M)
SOURCE_EXT = ('.h', '.hpp', '.cc', '.cpp', '.c')


def files_under(root, folder):
    base = os.path.join(root, folder)
    for dirpath, _, names in os.walk(base):
        for name in sorted(names):
            if name.endswith(SOURCE_EXT):
                yield os.path.relpath(os.path.join(dirpath, name), root).replace(os.sep, '/')


def includes(root, path):
    with open(os.path.join(root, path), encoding='utf-8', errors='replace') as f:
        text = f.read()
    return [(kind == '<', name) for kind, name in INCLUDE.findall(text)]


def main(root):
    problems = []
    src = list(files_under(root, 'src'))
    # Header name -> the src/ files of that name (src/ includes by bare name).
    by_name = {}
    for path in src:
        if path.endswith(('.h', '.hpp')):
            by_name.setdefault(os.path.basename(path), []).append(path)
    for name, paths in sorted(by_name.items()):
        if len(paths) > 1:
            problems.append(f'header name {name} used in two folders of src/: {", ".join(paths)}')

    def folder_of(path):  # "src/model/file_access.h" -> "model"
        parts = path.split('/')
        return parts[1] if len(parts) > 2 else ''

    def resolve_src(including, name):
        """The src/ file a quoted include names, or None."""
        here = os.path.join(os.path.dirname(including), name)
        if os.path.isfile(os.path.join(root, here)):
            rel = os.path.normpath(here).replace(os.sep, '/')
            return rel if rel.startswith('src/') else None
        candidates = by_name.get(os.path.basename(name), [])
        return candidates[0] if candidates and '/' not in name else None

    # Which src/ files reach ONNX Runtime, directly or through their includes (a fixed point).
    direct = {}
    edges = {}
    for path in src:
        incs = includes(root, path)
        # <onnxruntime_...> or "onnxruntime_..." (quotes fall back to the include path): ORT's, never ours.
        direct[path] = [n for _, n in incs if os.path.basename(n).startswith('onnxruntime_')]
        edges[path] = [t for t in (resolve_src(path, n) for angle, n in incs if not angle) if t]
    reaches = {p for p in src if direct[p]}
    changed = True
    while changed:
        changed = False
        for p in src:
            if p not in reaches and any(t in reaches for t in edges[p]):
                reaches.add(p)
                changed = True

    def ort_allowed(path):
        return path.startswith('src/ort/') or (path.startswith('src/bench/') and not path.endswith('.h'))

    for path in src:
        if path in reaches and not ort_allowed(path):
            how = (f'includes <{direct[path][0]}>' if direct[path]
                   else 'reaches ONNX Runtime through ' + ', '.join(t for t in edges[path] if t in reaches))
            problems.append(f'{path} {how}: only src/ort/ includes ONNX Runtime')

    # The rest of the tree: no ONNX Runtime header, no src/ header but the allowed ones.
    # src/ocr/bare_ocr.h: `ebb bench ocr`'s plain-ORT baseline (the ebb_bench_ocr target, bench-only as bench/).
    allowed = {'cli': {'src/port/port.h', 'src/ocr/bare_ocr.h'} |
                      {p for p in src if p.startswith('src/bench/') and p.endswith('.h')},
               'server': {'src/port/port.h'}}
    for top in ('cli', 'server', 'include', 'python', 'java', 'fuzz', 'tools'):
        for path in files_under(root, top):
            for angle, name in includes(root, path):
                if os.path.basename(name).startswith('onnxruntime_'):
                    problems.append(f'{path} includes <{name}>: only src/ort/ includes ONNX Runtime')
                    continue
                if angle:
                    continue
                local = os.path.join(root, os.path.dirname(path), name)
                if os.path.isfile(local) or os.path.isfile(os.path.join(root, 'include', name)):
                    continue
                if top in ('cli', 'server') and os.path.isfile(os.path.join(root, 'server', name)):
                    continue  # "core/service.h", "http/..."
                target = resolve_src(path, name)
                if target and target in reaches:
                    problems.append(f'{path} includes "{name}", which reaches ONNX Runtime ({target})')
                elif target and top in allowed and target not in allowed[top]:
                    problems.append(f'{path} includes "{name}" ({target}): {top}/ includes of src/ only '
                                    + ', '.join(sorted(allowed[top])))

    # Circles between folders.
    graph = {}
    for path in src:
        for t in edges[path]:
            a, b = folder_of(path), folder_of(t)
            if a and b and a != b:
                graph.setdefault(a, set()).add(b)
    state = {}

    def visit(node, trail):
        state[node] = 'open'
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 'open':
                circle = trail[trail.index(nxt):] + [nxt]
                problems.append('include circle between folders of src/: ' + ' -> '.join(circle))
            elif nxt not in state:
                visit(nxt, trail + [nxt])
        state[node] = 'done'

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])

    for p in problems:
        print(p)
    if not problems:
        print(f'boundaries hold: {len(src)} files of src/, folders {sorted(set(map(folder_of, src)) - {""})}')
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), '..')))
