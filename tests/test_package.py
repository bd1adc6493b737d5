"""The package namespace: every public name resolves, lazily."""

import object_input


def test_every_public_name_resolves_and_all_is_complete():
    exported = set(object_input._EXPORTS) | set(object_input._SUBMODULES)
    assert set(object_input.__all__) == exported
    for name in object_input.__all__:
        assert getattr(object_input, name) is not None
    assert object_input.make_dataset.__module__ == "object_input.pipeline"


def _module_imports(path, package_root):
    """The package modules a module imports at its top level (not inside functions)."""
    import ast

    found = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("object_input"):
            for alias in node.names:
                candidate = f"{node.module}.{alias.name}"
                as_file = package_root / (candidate.replace(".", "/") + ".py")
                found.add(candidate if as_file.exists() else node.module)
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("object_input")}
    return found


def test_no_import_cycles_between_modules():
    # Package __init__ files re-export their modules; a cycle through one of them is how a
    # package is built, not a cycle between modules.
    from pathlib import Path

    root = Path(object_input.__file__).parent
    graph = {}
    for path in root.rglob("*.py"):
        name = ".".join(path.relative_to(root.parent).with_suffix("").parts)
        if name.endswith(".__init__"):
            continue
        graph[name] = _module_imports(path, root.parent)

    def cycle_from(start):
        stack, seen = [(start, [start])], set()
        while stack:
            module, route = stack.pop()
            for target in graph.get(module, ()):
                if target == start:
                    return [*route, start]
                if target in graph and target not in seen:
                    seen.add(target)
                    stack.append((target, [*route, target]))
        return None

    cycles = [cycle for name in sorted(graph) if (cycle := cycle_from(name))]
    assert not cycles, f"import cycles: {cycles[:3]}"
