from probe.test_probe_lab import _probe
from fabricase.capturedir import load_capture
from fabricase.analysis.probe import load_probe, probe_measures
from pathlib import Path

def test_dbg(probe_lab, tmp_path):
    doc, code = _probe(probe_lab, tmp_path, "x", "--test", "rdma", "--test", "nccl", "--bisect")
    cap = load_capture(Path(doc["capture_dir"]))
    d, why = load_probe(cap.root)
    for m in probe_measures(cap, d):
        print(m.test.id, m.test.stage, m.test.hosts, m.value, m.unit, m.reason)
    from fabricase.analysis.probe_text import probe_text
    for l in probe_text(cap): print("|", l)
    assert 0
