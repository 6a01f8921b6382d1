"""GPUs timed through a fitted sibling (prenet.sibling_gpu: the same chip, other clocks or bandwidth) against what
the unseen-GPU bundle alone gives them. No layer of these GPUs was measured here, so this is a consistency check,
not an accuracy one: a GPU with the sibling's chip, a higher clock and no less bandwidth should not be slower, and
the unseen bundle's own estimate of the fitted sibling shows how far it is from the seen bundle there. Device
milliseconds of one training step (SGD, fp32, 224 px) per model at batch 64.
Usage: python bench/sibling_gpus.py [--out bench/results/sibling_gpus.md]"""
import argparse
import time
import warnings

import torchvision

import prenet
from prenet.catalog import find_gpu
from prenet.predictors import PACKAGED_BUNDLE, PACKAGED_UNSEEN_BUNDLE, fitted_devices
from prenet.sibling_gpu import fitted_sibling
from report import RESULTS, write_report

MODELS = ("resnet50", "vgg16", "vit_b_16")
BATCH = 64


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=RESULTS / "sibling_gpus.md")
    args = parser.parse_args()
    started = time.time()
    warnings.simplefilter("ignore")  # the host CPU warning of a CPU estimate does not apply; none is made
    fitted = fitted_devices(PACKAGED_BUNDLE)
    siblings = [(row.name, fitted_sibling(row.name, fitted)) for row in prenet.gpus().itertuples()
                if row.name not in fitted and prenet.predictors.measured_twin(row.name) is None]
    siblings = [(gpu, sibling) for gpu, sibling in siblings if sibling]
    rows = []
    for name in MODELS:
        model = getattr(torchvision.models, name)()

        def device_ms(gpu, bundle=None):
            return prenet.predict(model, batch=BATCH, gpu=gpu, input_shape=(3, 224, 224), dataset_size=BATCH,
                                  bundle=bundle).device_ms

        for gpu, sibling in siblings:
            spec, other = find_gpu(gpu), find_gpu(sibling)
            seen, unseen_there = device_ms(sibling), device_ms(sibling, str(PACKAGED_UNSEEN_BUNDLE))
            alone, through = device_ms(gpu, str(PACKAGED_UNSEEN_BUNDLE)), device_ms(gpu)
            rows.append(f"| {name} | {gpu} | {sibling} | {spec['boost_clock_mhz'] / other['boost_clock_mhz']:.3f} | "
                        f"{spec['memory_bandwidth_gbs'] / other['memory_bandwidth_gbs']:.3f} | {seen:.1f} | "
                        f"{unseen_there:.1f} | {alone:.1f} | {through:.1f} | {through / seen:.3f} |")
            print(rows[-1], flush=True)
    text = "\n".join([
        "# GPUs timed through a fitted sibling", "",
        f"`.venv/bin/python bench/sibling_gpus.py` ({time.strftime('%Y-%m-%d')}, {time.time() - started:.0f} s). "
        f"Device milliseconds of one training step at batch {BATCH} (SGD, fp32, 224 px). 'seen': the seen-GPU "
        "bundle on the fitted sibling (what the sibling is estimated at); 'unseen on sibling': the unseen-GPU bundle "
        "on that same fitted GPU; 'unseen alone': the GPU by the unseen bundle, as it was timed before siblings; "
        "'through sibling': seen x (unseen on the GPU / unseen on the sibling), as it is timed now. Clock and "
        "bandwidth: the GPU's over the sibling's (catalog). No layer of these GPUs is measured here: a check of "
        "consistency, not of accuracy.", "",
        "| model | GPU | sibling | clock ratio | bandwidth ratio | seen (sibling) | unseen on sibling | unseen alone "
        "| through sibling | through / seen |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |", *rows, ""])
    write_report(args.out, text)


if __name__ == "__main__":
    main()
