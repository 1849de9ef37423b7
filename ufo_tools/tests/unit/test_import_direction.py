"""Dependencies between the project's packages run one way.

* ``ufo_agent`` (the hypervisor agent) imports only ``ufo_agent``;
* ``ufo_nova`` (inside nova-scheduler and nova-api) imports only
  ``ufo_nova`` and what it shares with the agent: the wire format,
  ``ufo_agent.hostsignal``, and the flavor extra specs,
  ``ufo_agent.extraspecs``;
* ``ufo_sim`` imports ``ufo_sim``, ``ufo_agent`` and ``ufo_nova`` (it runs
  the agent, and the scheduler plugins inside Nova's scheduler code);
* ``ufo_tools`` (benchmarks, demo, test guests, e2e harness) imports
  anything.

Every non-test module is parsed, imports inside functions included; test
directories are exempt (the agent's unit tests use ufo_tools' fakes, its
functional tests boot ufo_tools' test guests). A second test imports the
agent, the scheduler plugins and the tooling with the extras' packages
(libvirt, numpy, matplotlib) hidden: the base install must import them.
Only Nova's and Watcher's own packages may be missing: the scheduler
plugins run inside nova-scheduler, the Watcher strategy inside
watcher-decision-engine, which bring them.
"""

import ast
import importlib.util
import os
import subprocess
import sys

PACKAGES = ('ufo_agent', 'ufo_nova', 'ufo_sim', 'ufo_tools')
ALLOWED = {
    'ufo_agent': ('ufo_agent',),
    'ufo_nova': ('ufo_nova', 'ufo_agent.hostsignal',
                 'ufo_agent.extraspecs'),
    'ufo_sim': ('ufo_sim', 'ufo_agent', 'ufo_nova'),
    'ufo_tools': PACKAGES,
}
EXTRAS = ('libvirt', 'numpy', 'matplotlib')
# The services that load ufo_nova's plugins, and provide these packages.
HOSTS = ('nova', 'watcher')


def _within(name, prefixes):
    return any(name == p or name.startswith(p + '.') for p in prefixes)


def _imported(tree, module):
    """(line, [candidate names]) of every import in ``tree``.

    ``from a import b`` yields ``a.b`` and ``a``: either being allowed
    allows it (``b`` may be a module or a name defined in ``a``).
    """
    package = module.rpartition('.')[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, [alias.name]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ''
            if node.level:
                parent = package.split('.')
                parent = parent[:len(parent) - node.level + 1]
                base = '.'.join(parent + ([base] if base else []))
            for alias in node.names:
                yield node.lineno, ['%s.%s' % (base, alias.name), base]
        elif isinstance(node, ast.Call) and node.args and isinstance(
                node.args[0], ast.Constant) and isinstance(
                node.args[0].value, str):
            func = node.func
            name = getattr(func, 'attr', None) or getattr(func, 'id', None)
            if name in ('import_module', '__import__'):
                yield node.lineno, [node.args[0].value]


def forbidden_imports(source, module):
    """[(line, name)] of the imports ``module`` (dotted) must not make."""
    allowed = ALLOWED[module.split('.')[0]]
    found = []
    for line, names in _imported(ast.parse(source), module):
        first_party = [n for n in names if n.split('.')[0] in PACKAGES]
        if first_party and not any(_within(n, allowed) for n in names):
            found.append((line, first_party[0]))
    return found


def _modules(package):
    """(dotted name, path) of every non-test module of ``package``."""
    root = importlib.util.find_spec(package).submodule_search_locations[0]
    top = os.path.dirname(root)
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames
                             if d != 'tests' and d != '__pycache__')
        for filename in sorted(filenames):
            if not filename.endswith('.py'):
                continue
            path = os.path.join(dirpath, filename)
            name = os.path.relpath(path, top)[:-3].replace(os.sep, '.')
            if name.endswith('.__init__'):
                name = name[:-len('.__init__')]
            yield name, path


def test_every_package_imports_in_the_allowed_direction():
    violations = []
    count = 0
    for package in PACKAGES:
        for name, path in _modules(package):
            count += 1
            with open(path) as f:
                for line, target in forbidden_imports(f.read(), name):
                    violations.append('%s:%d imports %s' % (path, line,
                                                            target))
    assert count > 50          # the walk found the packages
    assert not violations, '\n'.join(violations)


def test_checker_finds_a_forbidden_import_in_an_agent_module():
    path = dict(_modules('ufo_agent'))['ufo_agent.service.loop']
    with open(path) as f:
        source = f.read()
    assert forbidden_imports(source, 'ufo_agent.service.loop') == []
    injected = source + '\n\ndef _f():\n    import ufo_nova\n'
    lines = len(source.splitlines())
    assert forbidden_imports(injected, 'ufo_agent.service.loop') == [
        (lines + 4, 'ufo_nova')]


def test_checker_rules():
    def check(source, module):
        return [t for _, t in forbidden_imports(source, module)]

    agent = 'ufo_agent.driver.x'
    assert check('from ufo_nova import cache', agent) == ['ufo_nova.cache']
    assert check('import ufo_tools.e2e as h', agent) == ['ufo_tools.e2e']
    assert check('from ufo_sim import engine', agent) == ['ufo_sim.engine']
    assert check("importlib.import_module('ufo_nova.filter')", agent) == [
        'ufo_nova.filter']
    assert check('from ufo_agent import cpuset\nimport os\nimport nova',
                 agent) == []
    assert check('from . import base', agent) == []
    nova = 'ufo_nova.listener'
    assert check('from ufo_agent import hostsignal', nova) == []
    assert check('from ufo_agent.hostsignal import payload', nova) == []
    assert check('from ufo_agent import conf', nova) == ['ufo_agent.conf']
    assert check('import ufo_agent.service.loop', nova) == [
        'ufo_agent.service.loop']
    assert check('from .. import conf', 'ufo_nova.sub.mod') == []
    sim = 'ufo_sim.driver'
    assert check('from ufo_agent.service import loop', sim) == []
    assert check('from ufo_tools import testguest', sim) == [
        'ufo_tools.testguest']
    assert check('from ufo_nova import decision', sim) == []
    assert check('from ufo_sim import engine', nova) == ['ufo_sim.engine']
    assert check('import ufo_nova, ufo_sim, ufo_agent', 'ufo_tools.x') == []


def test_base_install_imports_the_agent_plugins_and_tooling():
    modules = [name for package in ('ufo_agent', 'ufo_nova', 'ufo_tools')
               for name, _ in _modules(package)]
    code = '\n'.join([
        'import importlib, sys',
        'for name in %r:' % (EXTRAS,),
        '    sys.modules[name] = None',
        'failed = []',
        'for module in sys.argv[1:]:',
        '    try:',
        '        importlib.import_module(module)',
        '    except ImportError as exc:',
        "        if (exc.name or '').split('.')[0] not in %r:" % (HOSTS,),
        "            failed.append('%s: %r' % (module, exc))",
        "print('\\n'.join(failed))",
    ])
    out = subprocess.run([sys.executable, '-c', code] + modules,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ''
