#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Writes or checks docs/plugins/gst_plugins_cache.json for the plugin.

The cache is what upstream GStreamer modules check in for hotdoc: what the
built plugin says of its elements (metadata, properties with blurb, type,
default, range and flags, signals, pad templates and caps, the pad type and
enums registered as plugin API).  Upstream makes it with
gst-hotdoc-plugins-scanner (C) and gst-plugins-doc-cache-generator.py;
Debian 12 ships neither, so this reads the same facts through GObject
introspection (python3-gi, gir1.2-gstreamer-1.0) and writes the same
schema, formatted as upstream's generator formats it (sorted keys, indent
4, one newline at the end).  Where the scanner prints oddly (uint with %d,
so G_MAXUINT is "-1"; int64 defaults unsigned; '%' doubled, "src_%%u") this
prints the same, so hotdoc reads both alike and a change of tool is no diff
(checked against upstream's cache of coreelements: the same but for what
GStreamer versions changed).

Unlike upstream's generator it doesn't merge into the old cache (which
keeps entries of removed properties forever): the file is exactly what the
plugin says now.  Nothing in it depends on the machine: defaults are read
from a new element in NULL (none reads the host), the plugin is loaded on
its own into a registry of its own, and the build's package name and
origin (-Dpackage-name, -Dpackage-origin, which a distribution sets) are
left out of --check.

  plugins-cache.py PLUGIN.so OUTPUT.json           write the cache
  plugins-cache.py --check CACHE.json PLUGIN.so    fail if it differs
"""

import difflib
import json
import os
import re
import sys
import tempfile


def load_gst(registry_dir):
    # Only this plugin, whatever the user has installed or cached.
    os.environ['GST_REGISTRY_1_0'] = os.path.join(registry_dir, 'reg.bin')
    os.environ['GST_PLUGIN_SYSTEM_PATH_1_0'] = ''
    os.environ.pop('GST_PLUGIN_PATH_1_0', None)
    os.environ.pop('GST_PLUGIN_PATH', None)
    import gi
    gi.require_version('Gst', '1.0')
    from gi.repository import GObject, Gst
    Gst.init(None)
    return GObject, Gst


def esc(s):
    # The scanner's json_strescape: NULL as "NULL" and '%' doubled; the
    # rest of its escaping is JSON's own, done by json.dumps.
    return 'NULL' if s is None else s.replace('%', '%%')


class Scanner:
    def __init__(self, GObject, Gst):
        self.GObject, self.Gst = GObject, Gst
        self.other_types = {}

    def plugin_api(self, gtype):
        return self.Gst.type_is_plugin_api(gtype)[0]

    def add_other_type(self, gtype, pspec=None):
        """An enum, flags or object type marked as plugin API, once."""
        G = self.GObject
        if gtype.name in self.other_types or not self.plugin_api(gtype):
            return
        if gtype.is_a(G.TYPE_ENUM):
            vals = pspec.enum_class.__enum_values__ if pspec else \
                gtype.pytype.__enum_values__
            self.other_types[gtype.name] = {
                'kind': 'enum',
                'values': [{'name': esc(v.value_nick),
                            'value': '%d' % int(v),
                            'desc': esc(v.value_name)}
                           for _, v in sorted(vals.items())]}
        elif gtype.is_a(G.TYPE_FLAGS):
            vals = pspec.flags_class.__flags_values__ if pspec else \
                gtype.pytype.__flags_values__
            self.other_types[gtype.name] = {
                'kind': 'flags',
                'values': [{'name': esc(v.first_value_nick),
                            'value': '0x%08x' % int(v),
                            'desc': esc(v.first_value_name)}
                           for _, v in sorted(vals.items())]}
        elif gtype.is_a(G.TYPE_OBJECT):
            # Registered before its details: a property of its own type
            # must not recurse.
            entry = {'kind': 'object'}
            self.other_types[gtype.name] = entry
            entry.update(self.object_details(G.new(gtype), gtype))

    def object_details(self, obj, gtype):
        G = self.GObject
        d = {'hierarchy': []}
        t = gtype
        while True:
            d['hierarchy'].append(t.name)
            if t == G.TYPE_OBJECT:
                break
            if t != gtype:
                self.add_other_type(t)
            t = t.parent
        ifaces = G.type_interfaces(gtype)
        if ifaces:
            d['interfaces'] = [i.name for i in ifaces]
        props = {}
        for spec in obj.list_properties():
            if spec.owner_type == gtype:
                props[spec.name] = self.property(obj, spec)
        if props:
            d['properties'] = props
        signals = {}
        for sid in G.signal_list_ids(gtype):
            signals.update(self.signal(G.signal_query(sid)))
        if signals:
            d['signals'] = signals
        return d

    def property(self, obj, spec):
        G, Gst = self.GObject, self.Gst
        f = int(spec.flags)
        if f & int(Gst.PARAM_MUTABLE_PLAYING):
            mutable = 'playing'
        elif f & int(Gst.PARAM_MUTABLE_PAUSED):
            mutable = 'paused'
        elif f & int(Gst.PARAM_MUTABLE_READY):
            mutable = 'ready'
        else:
            mutable = 'null'
        p = {
            'construct-only': bool(f & int(G.ParamFlags.CONSTRUCT_ONLY)),
            'construct': bool(f & int(G.ParamFlags.CONSTRUCT)),
            'readable': bool(f & int(G.ParamFlags.READABLE)),
            'writable': bool(f & int(G.ParamFlags.WRITABLE)),
            'blurb': esc(spec.blurb),
            'controllable': bool(f & int(Gst.PARAM_CONTROLLABLE)),
            'conditionally-available':
                bool(f & int(Gst.PARAM_CONDITIONALLY_AVAILABLE)),
            'mutable': mutable,
            'type': spec.value_type.name,
        }
        self.add_other_type(spec.value_type, spec)
        # As the scanner: the value of a new instance, unless the property
        # says its documented default is the spec's (DOC_SHOW_DEFAULT).
        if (f & int(G.ParamFlags.READABLE)) and \
                not (f & int(Gst.PARAM_DOC_SHOW_DEFAULT)):
            value = obj.get_property(spec.name)
        else:
            value = spec.get_default_value()
        p.update(self.default(spec, value))
        return p

    def default(self, spec, value):
        G, Gst = self.GObject, self.Gst
        vt = spec.value_type
        fund = vt.fundamental
        if vt == G.TYPE_STRING:
            return {'default': esc(value)}
        if vt == G.TYPE_BOOLEAN:
            return {'default': 'true' if value else 'false'}
        ranged = {
            # The scanner prints uint with %d and int64 defaults unsigned.
            G.TYPE_UINT: lambda v: '%d' % (v - (1 << 32) if v >= 1 << 31
                                           else v),
            G.TYPE_INT: lambda v: '%d' % v,
            G.TYPE_UINT64: lambda v: '%d' % v,
            G.TYPE_INT64: lambda v: '%d' % v,
            G.TYPE_LONG: lambda v: '%d' % v,
            G.TYPE_ULONG: lambda v: '%d' % v,
            G.TYPE_FLOAT: lambda v: '%g' % v,
            G.TYPE_DOUBLE: lambda v: '%g' % v,
        }
        if vt in ranged:
            fmt = ranged[vt]
            dflt = value % (1 << 64) if vt == G.TYPE_INT64 else value
            return {'default': fmt(dflt), 'min': fmt(spec.minimum),
                    'max': fmt(spec.maximum)}
        if fund == G.TYPE_ENUM:
            v = spec.enum_class.__enum_values__.get(int(value))
            return {'default': '%s (%d)' % (esc(v.value_nick) if v is not None else '',
                                            int(value))}
        if fund == G.TYPE_FLAGS:
            return {'default': self.flags_string(spec, int(value))}
        if vt == Gst.Caps.__gtype__:
            return {'default': esc(value.to_string())} if value else {}
        if vt == Gst.Structure.__gtype__:
            return {'default': esc(value.to_string())} if value else {}
        if vt == Gst.Fraction.__gtype__:
            return {'default': '%d/%d' % (value.num, value.denom),
                    'min': '%d/%d' % (spec.min_num, spec.min_den),
                    'max': '%d/%d' % (spec.max_num, spec.max_den)}
        return {}

    @staticmethod
    def flags_string(spec, flags):
        vals = sorted(spec.flags_class.__flags_values__.items())
        for v, fv in vals:
            if v == flags:
                return esc(fv.first_value_nick)
        names, left = [], flags
        for v, fv in reversed(vals):
            if v and (left & v) == v:
                names.append(fv.first_value_nick)
                left -= v
                if not left:
                    break
        return esc('+'.join(names)) if names else '(none)'

    def signal(self, q):
        G = self.GObject
        s = {'args': [{'name': 'arg%u' % i, 'type': t.name}
                      for i, t in enumerate(q.param_types)],
             'return-type': q.return_type.name}
        for t in list(q.param_types) + [q.return_type]:
            self.add_other_type(t)
        fl = int(q.signal_flags)
        for flag, when in ((G.SignalFlags.RUN_FIRST, 'first'),
                           (G.SignalFlags.RUN_LAST, 'last'),
                           (G.SignalFlags.RUN_CLEANUP, 'cleanup')):
            if fl & int(flag):
                s['when'] = when
                break
        for flag, key in ((G.SignalFlags.NO_RECURSE, 'no-recurse'),
                          (G.SignalFlags.DETAILED, 'detailed'),
                          (G.SignalFlags.ACTION, 'action'),
                          (G.SignalFlags.NO_HOOKS, 'no-hooks')):
            if fl & int(flag):
                s[key] = True
        return {q.signal_name: s}

    def caps(self, caps):
        if caps.is_any():
            return 'ANY'
        if caps.is_empty():
            return 'EMPTY'
        # As the scanner's _build_caps: "name:\n" per structure, then its
        # fields one a line.  Only structures without fields or caps
        # features so far (rdmaframeset's src): fields are serialized by
        # gst_value_serialize, which gi can't reach without gst-python.
        # Say so rather than write something else.
        out = ''
        sysmem = self.Gst.CapsFeatures.new_empty()
        sysmem.add('memory:SystemMemory')
        for i in range(caps.get_size()):
            st, feat = caps.get_structure(i), caps.get_features(i)
            if st.n_fields() or (feat is not None and (
                    feat.is_any() or not feat.is_equal(sysmem))):
                sys.exit('plugins-cache.py: pad template caps with fields or '
                         'features (%s) are not supported yet' %
                         caps.to_string())
            out += '%s:\n' % st.get_name()
        return out

    def element(self, factory):
        Gst = self.Gst
        el = factory.create(None)
        if el is None:
            sys.exit("plugins-cache.py: couldn't make %s" % factory.get_name())
        d = {'rank': self.rank(factory.get_rank())}
        # Every key, long-name too: the scanner leaves long-name out (some
        # elements make it from the environment), but every upstream cache
        # has it (kept by their generator's merge) and ours is fixed.
        for key in factory.get_metadata_keys():
            d[key] = esc(factory.get_metadata(key))
        d.update(self.object_details(el, el.__gtype__))
        templates = {}
        for st in factory.get_static_pad_templates():
            tmpl = el.get_pad_template(st.name_template)
            t = {
                'caps': esc(self.caps(tmpl.get_documentation_caps())),
                'direction': {Gst.PadDirection.SRC: 'src',
                              Gst.PadDirection.SINK: 'sink'}.get(
                                  st.direction, 'unknown'),
                'presence': {Gst.PadPresence.ALWAYS: 'always',
                             Gst.PadPresence.SOMETIMES: 'sometimes',
                             Gst.PadPresence.REQUEST: 'request'}.get(
                                 st.presence, 'unknown'),
            }
            pad_type = tmpl.get_property('gtype')
            if pad_type not in (self.GObject.TYPE_NONE, Gst.Pad.__gtype__):
                t['type'] = pad_type.name
                self.add_other_type(pad_type)
            templates[esc(st.name_template)] = t
        if templates:
            d['pad-templates'] = templates
        return d

    @staticmethod
    def rank(rank):
        ranks = [(0, 'none'), (64, 'marginal'), (128, 'secondary'),
                 (256, 'primary')]
        for r, name in ranks:
            if rank == r:
                return name
        r, name = min(ranks, key=lambda x: abs(rank - x[0]))
        return '%s %c %d' % (name, '+' if rank > r else '-', abs(rank - r))

    def plugin(self, path):
        Gst = self.Gst
        plugin = Gst.Plugin.load_file(path)
        filename = os.path.basename(path).split('.', 1)[0]
        if filename.startswith('lib'):
            filename = filename[3:]
        features = Gst.Registry.get().get_feature_list_by_plugin(
            plugin.get_name())
        elements, tracers = {}, {}
        for f in sorted(features, key=lambda f: f.get_name()):
            if isinstance(f, Gst.ElementFactory):
                if not f.get_skip_documentation():
                    elements[f.get_name()] = self.element(f)
            elif isinstance(f, Gst.TracerFactory):
                tracers[f.get_name()] = {}
        return {plugin.get_name(): {
            'description': esc(plugin.get_description()),
            'filename': filename,
            'source': esc(plugin.get_source()),
            # Upstream's generator drops these suffixes of the name.
            'package': re.sub(' git$| source release$| prerelease$', '',
                              plugin.get_package()),
            'license': esc(plugin.get_license()),
            'url': esc(plugin.get_origin()),
            'elements': elements,
            'tracers': tracers,
            'other-types': self.other_types,
        }}


def dump(data):
    return json.dumps(data, indent=4, sort_keys=True,
                      ensure_ascii=False) + '\n'


def scan(plugin_path):
    with tempfile.TemporaryDirectory() as tmp:
        GObject, Gst = load_gst(tmp)
        return Scanner(GObject, Gst).plugin(plugin_path)


def main(argv):
    if len(argv) == 4 and argv[1] == '--check':
        cache_path, plugin_path = argv[2], argv[3]
        new = scan(plugin_path)
        with open(cache_path, encoding='utf8') as f:
            old_text = f.read()
        old = json.loads(old_text)
        # The build's options, not the plugin's: a distribution's build
        # with its own -Dpackage-name/-Dpackage-origin still passes.
        for name, p in new.items():
            for key in ('package', 'url'):
                if name in old and key in old[name]:
                    p[key] = old[name][key]
        new_text = dump(new)
        if new_text == old_text:
            return 0
        sys.stdout.writelines(difflib.unified_diff(
            old_text.splitlines(True), new_text.splitlines(True),
            cache_path, 'what the built plugin says'))
        print('\n%s differs from the built plugin.  If the change is meant, '
              'regenerate it and commit it:\n  ninja -C BUILDDIR '
              'update-plugins-cache' % cache_path)
        return 1
    if len(argv) == 3 and not argv[1].startswith('-'):
        text = dump(scan(argv[1]))
        with open(argv[2], 'w', encoding='utf8', newline='\n') as f:
            f.write(text)
        return 0
    print(__doc__.strip().split('\n\n')[-1], file=sys.stderr)
    return 2


if __name__ == '__main__':
    sys.exit(main(sys.argv))
