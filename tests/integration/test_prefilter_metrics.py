"""The pre-filter's drift signal in the EMF lines: turns screened, rejections and dropped
sentences by rule, and survivors that extraction then found empty (escapes)."""

from __future__ import annotations

from tests.emf import emf_metrics, metric_total


def test_rejections_dropped_sentences_and_escapes_are_counted_by_rule(
    make_local, make_body, capsys
):
    # Given a deployment printing its EMF metrics, and a request with a thank-you (rejected),
    # a greeting before a hypothetical (which passes, then holds nothing durable) and a fact
    local = make_local(env={"POWERTOOLS_METRICS_DISABLED": "false"})
    body = make_body(
        "Thanks so much!",
        "Hi! If I lived in Paris I would cycle everywhere.",
        "I moved to Lisbon in March for a new job.",
        session_id="metrics-1",
    )

    # When it is posted and the pipeline runs
    posted = local.post_turns(body)
    local.runner.drain()
    metrics = emf_metrics(capsys.readouterr().out)

    # Then the three turns were screened, one rejected by the greeting rule, one sentence of a
    # kept turn dropped by the same rule: CloudWatch can divide them per rule
    assert posted.status == 202 and posted.body["accepted"] == 2
    assert metric_total(metrics, "prefilter.screened", Stage="pre_filter") == 3
    assert metric_total(metrics, "prefilter.rejected", Stage="pre_filter", Rule="greeting_ack") == 1
    assert metric_total(metrics, "prefilter.rejected", Stage="pre_filter") == 1
    assert metric_total(metrics, "prefilter.sentences", Stage="pre_filter") == 4
    # the thank-you and the "Hi!"
    assert metric_total(metrics, "prefilter.sentence_dropped", Rule="greeting_ack") == 2
    # And the hypothetical passed but extraction kept nothing of it: one escape, the fact none
    assert metric_total(metrics, "prefilter.escaped", Stage="extract") == 1


def test_a_rejection_without_a_rule_is_counted_under_its_reason(make_local, make_body, capsys):
    # Given a deployment printing its EMF metrics
    local = make_local(env={"POWERTOOLS_METRICS_DISABLED": "false"})
    # When a one-word turn and a fact are posted
    local.post_turns(make_body("ok", "I adopted a cat named Miso."))
    metrics = emf_metrics(capsys.readouterr().out)
    # Then the rejection is counted under the reason's type; no sentence was dropped by a rule
    assert metric_total(metrics, "prefilter.rejected", Rule="TooShort") == 1
    assert metric_total(metrics, "prefilter.screened") == 2
    assert metric_total(metrics, "prefilter.sentence_dropped") == 0
