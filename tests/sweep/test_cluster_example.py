"""The `ray up` cluster file of examples/cluster is one Ray's cluster launcher accepts (its own schema check), and
its GPU node type declares the instance the docs name."""
import json
from pathlib import Path

import jsonschema  # a dependency of Ray
import ray.autoscaler
import yaml

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "cluster" / "gpu-cluster.yaml"


def test_the_cluster_file_passes_rays_own_schema_check():
    config = yaml.safe_load(EXAMPLE.read_text())
    schema = json.loads((Path(ray.autoscaler.__file__).parent / "ray-schema.json").read_text())
    jsonschema.validate(config, schema)  # what `ray up` checks first: no unknown field, none missing
    assert config["head_node_type"] == "head" and config["available_node_types"]["head"]["resources"] == {}
    assert config["available_node_types"]["gpu_8x"]["node_config"]["InstanceType"] == "p4d.24xlarge"
    assert any("stabkit[ray]" in c for c in config["setup_commands"])
