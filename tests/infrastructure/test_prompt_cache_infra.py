"""The prompt cache on AWS, synthesized: an alarm pages when extraction calls flow and none
reads the cache (the cached prefix under the model's minimum cacheable length says nothing)."""

from __future__ import annotations

import pytest

from memwrite.config.settings import load_settings
from memwrite.costs.pricing import model_family
from tests.infrastructure.conftest import Synthesized
from tests.infrastructure.test_stacks import ENVS, resources


@pytest.mark.parametrize("env", ENVS)
def test_extraction_calls_without_cache_reads_raise_an_alarm(
    synthesized: dict[str, Synthesized], env: str
) -> None:
    # Given the stack and the extraction model it deploys
    settings = load_settings({"MEMWRITE_CONFIG": f"infra/settings/{env}.json"})
    model = model_family(settings.pipeline.extract.model)
    # When its alarms are read
    alarms = resources(synthesized[env], "AWS::CloudWatch::Alarm")
    (alarm,) = (a for logical_id, a in alarms.items() if "CacheReadsIdle" in logical_id)
    properties = alarm["Properties"]
    # Then it reads the extract stage's calls and cache reads for that model
    queries = {query["Id"]: query for query in properties["Metrics"]}
    for query_id, name in (("calls", "llm.calls"), ("reads", "llm.cache_read_input_tokens")):
        metric = queries[query_id]["MetricStat"]["Metric"]
        assert metric["MetricName"] == name
        assert metric["Namespace"] == "memwrite"
        assert {"Name": "Stage", "Value": "extract"} in metric["Dimensions"]
        assert {"Name": "Model", "Value": model} in metric["Dimensions"]
    # And it fires when calls flow (two or more in 5 minutes) and reads stay 0, for 15 minutes
    (expression,) = (q["Expression"] for q in properties["Metrics"] if "Expression" in q)
    assert expression == "IF(calls >= 2 AND FILL(reads, 0) == 0, 1, 0)"
    assert properties["Threshold"] == 1
    assert properties["EvaluationPeriods"] == 3
    assert properties["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
    assert properties["TreatMissingData"] == "notBreaching"
