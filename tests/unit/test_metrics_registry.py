"""eos._spark._metrics without Spark or a broker: a batch's summary becomes the labelled figures a Prometheus
scrape reads (prometheus_client's own text format and parser); `metrics_port` is checked as a port."""

from __future__ import annotations

import prometheus_client
import pytest
from prometheus_client.parser import text_string_to_metric_families

import eos
from eos._spark import _metrics
from eos.sink import Sink
from tests.unit.test_sink_history import stats


def figures(app: str) -> dict[tuple[str, tuple], float]:
    text = prometheus_client.generate_latest().decode()
    return {
        (s.name, tuple(sorted((k, v) for k, v in s.labels.items() if k != "app_id"))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.labels.get("app_id") == app
    }


def test_batch_summaries_become_labelled_counters_and_the_lag_a_gauge():
    config = eos.Config(bootstrap_servers="b:1", app_id="metrics-unit", output_topic="out", metrics_port=0)
    _metrics.enable(config.metrics_port)
    sink = Sink(config)
    for batch_id in range(3):
        summary = sink._summarize(batch_id, stats(batch_id, partitions=2), 0.5, False)
        ends = {("orders-in", 0): 5_000, ("orders-in", 1): 3_000}
        _metrics.record(config, summary, ends)
    got = figures("metrics-unit")
    p0, p1 = (("partition", "0"), ("topic", "orders-in")), (("partition", "1"), ("topic", "orders-in"))
    assert got[("eos_records_in_total", p0)] == got[("eos_records_out_total", p1)] == 3_000
    assert got[("eos_transactions_total", p0)] == 3
    assert got[("eos_commit_seconds_total", p0)] == pytest.approx(0.03)
    # after batch 2 eos committed up to offset 3,000 (its last offset 2,999)
    assert (got[("eos_input_lag_records", p0)], got[("eos_input_lag_records", p1)]) == (2_000, 0)
    assert (got[("eos_batches_total", ())], got[("eos_last_batch_id", ())]) == (3, 2)
    assert got[("eos_batch_seconds_count", ())] == 3
    assert ("eos_dead_letters_total", p0) not in got, "a figure that never moved is not invented"


@pytest.mark.parametrize(("value", "port"), [(None, None), ("", None), ("9108", 9108), (0, 0)])
def test_metrics_port_is_a_port_number(value, port):
    config = eos.Config(bootstrap_servers="b:1", app_id="a", output_topic="o", metrics_port=value)
    assert config.metrics_port == port


def test_metrics_port_from_the_environment_and_a_dotted_key():
    env = {
        "EOS_BOOTSTRAP_SERVERS": "b:1",
        "EOS_APP_ID": "a",
        "EOS_OUTPUT_TOPIC": "o",
        "EOS_METRICS_PORT": "9108",
    }
    assert eos.Config.from_env(env).metrics_port == 9108
    props = {"bootstrap.servers": "b:1", "app.id": "a", "output.topic": "o", "metrics.port": "9108"}
    assert eos.Config.from_properties(props).metrics_port == 9108


@pytest.mark.parametrize("value", ["http", -1, 70_000, True])
def test_a_bad_metrics_port_is_a_config_error_naming_it(value):
    with pytest.raises(eos.ConfigError) as info:
        eos.Config(bootstrap_servers="b:1", app_id="a", output_topic="o", metrics_port=value)
    assert info.value.field == "metrics_port"


def test_foreach_writer_refuses_a_metrics_port_it_could_not_serve():
    config = eos.Config(bootstrap_servers="b:1", app_id="a", output_topic="o", metrics_port=9108)
    with pytest.raises(eos.ConfigError) as info:
        eos.foreach_writer(config)
    assert info.value.field == "metrics_port"
