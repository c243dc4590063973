"""Numbers as printed in the papers, to set beside ours. Nothing here is a result of ours.

WAFFLe = Hao et al., "Weight Anonymized Factorization for Federated Learning", IEEE Access 2022.
Values are mean local test accuracy in %, variance in %^2 (their "±" spreads are kept too).
"""

# WAFFLe Table 2: local test accuracy, Z = 2, as (unimodal, multimodal)
WAFFLE_IBP_TABLE2 = {
    "mnist": {"fedavg": (94.46, 91.57), "fedprox": (94.44, 91.53), "qffl": (91.46, 88.42), "waffle_ibp": (96.23, 95.41)},
    "fashionmnist": {"fedavg": (83.96, 83.43), "fedprox": (84.19, 83.59), "qffl": (83.10, 85.73), "waffle_ibp": (87.12, 86.09)},
    "cifar10": {"fedavg": (52.54, 45.46), "fedprox": (52.36, 44.95), "qffl": (43.82, 38.25), "waffle_ibp": (71.30, 66.35)},
}
WAFFLE_IBP_TABLE2_SPREAD = {
    "mnist": {"fedavg": (0.84, 1.42), "fedprox": (1.15, 1.05), "qffl": (1.07, 1.24), "waffle_ibp": (0.31, 0.36)},
    "fashionmnist": {"fedavg": (0.91, 2.27), "fedprox": (0.99, 2.30), "qffl": (0.36, 0.21), "waffle_ibp": (0.89, 0.92)},
    "cifar10": {"fedavg": (0.14, 1.69), "fedprox": (0.11, 1.17), "qffl": (0.52, 1.12), "waffle_ibp": (0.92, 0.72)},
}

# WAFFLe Table 1: multimodal subpopulations, {metric: {dataset: {method: value}}}
WAFFLE_IBP_TABLE1 = {
    "majority": {"mnist": {"fedavg": 96.63, "fedprox": 96.43, "qffl": 94.93, "waffle_ibp": 95.93},
                 "fashionmnist": {"fedavg": 89.75, "fedprox": 89.95, "qffl": 88.73, "waffle_ibp": 88.91},
                 "cifar10": {"fedavg": 51.98, "fedprox": 51.26, "qffl": 42.00, "waffle_ibp": 68.37}},
    "minority": {"mnist": {"fedavg": 67.40, "fedprox": 68.60, "qffl": 54.20, "waffle_ibp": 93.87},
                 "fashionmnist": {"fedavg": 68.05, "fedprox": 67.50, "qffl": 69.40, "waffle_ibp": 79.67},
                 "cifar10": {"fedavg": 16.83, "fedprox": 16.56, "qffl": 18.14, "waffle_ibp": 55.00}},
    "gap": {"mnist": {"fedavg": 29.23, "fedprox": 27.83, "qffl": 40.73, "waffle_ibp": 2.07},
            "fashionmnist": {"fedavg": 21.70, "fedprox": 22.45, "qffl": 19.33, "waffle_ibp": 9.25},
            "cifar10": {"fedavg": 35.15, "fedprox": 32.70, "qffl": 23.87, "waffle_ibp": 13.37}},
    "variance": {"mnist": {"fedavg": 199, "fedprox": 186, "qffl": 355, "waffle_ibp": 26},
                 "fashionmnist": {"fedavg": 231, "fedprox": 233, "qffl": 212, "waffle_ibp": 145},
                 "cifar10": {"fedavg": 338, "fedprox": 318, "qffl": 220, "waffle_ibp": 182}},
}

# WAFFLe Table 2, "Param." column
WAFFLE_IBP_PARAMS = {"mnist": {"baseline": 155_800, "waffle_ibp": 120_200},
                     "fashionmnist": {"baseline": 28_880, "waffle_ibp": 18_155},
                     "cifar10": {"baseline": 61_770, "waffle_ibp": 42_780}}

# Weighted-averaging WAFFLE = Beaussart et al., "WAFFLE: Weighted Averaging for Personalized
# Federated Learning", 2021. Table 1, MNIST: Alice's best local test accuracy (%) over 100
# rounds, mean and std over 5 seeds, {distribution: {method: (mean, std)}}.
WEIGHTED_WAFFLE_TABLE1 = {
    "A": {"local": (96.88, 0.47), "fedavg": (98.99, 0.08), "scaffold": (99.03, 0.08),
          "weight_erosion": (99.01, 0.16), "waffle_weighted": (98.93, 0.10), "apfl": (97.55, 0.13)},
    "B": {"local": (99.38, 0.09), "fedavg": (98.97, 0.18), "scaffold": (99.24, 0.17),
          "weight_erosion": (99.69, 0.07), "waffle_weighted": (99.69, 0.03), "apfl": (99.36, 0.09)},
    "C": {"local": (98.54, 0.10), "fedavg": (98.56, 0.10), "scaffold": (98.77, 0.10),
          "weight_erosion": (99.00, 0.08), "waffle_weighted": (99.00, 0.08), "apfl": (98.45, 0.08)},
    "A*": {"local": (96.56, 0.27), "fedavg": (13.37, 3.21), "scaffold": (19.93, 5.95),
           "weight_erosion": (98.09, 0.26), "waffle_weighted": (97.99, 0.26), "apfl": (96.24, 0.22)},
    "B*": {"local": (99.47, 0.07), "fedavg": (45.26, 4.10), "scaffold": (57.51, 4.02),
           "weight_erosion": (99.67, 0.09), "waffle_weighted": (99.63, 0.11), "apfl": (99.44, 0.07)},
}

# GMA = Tenison et al., "Gradient Masked Averaging for Federated Learning", TMLR 2023.
# Best test accuracy (%), mean of 4 runs, as (AVG, GMA), keyed by (dataset, skew, clients).
# Table 2 (non-IID label skew = 2 classes per client) and Table 3 (FedCMNIST mixed skew).
GMA_TABLE = {
    ("mnist", "label", 500): {"fedavg": (96.24, 97.36), "fedprox": (95.80, 96.55),
                              "fedadam": (97.75, 98.48), "fedyogi": (98.21, 98.38)},
    ("mnist", "label", 100): {"fedavg": (98.60, 98.75), "fedprox": (97.76, 98.64),
                              "fedadam": (98.88, 98.94), "fedyogi": (98.58, 98.82)},
    ("fashionmnist", "label", 500): {"fedavg": (78.02, 78.82), "fedprox": (76.21, 77.77),
                                     "fedadam": (78.80, 81.28), "fedyogi": (78.66, 80.58)},
    ("fashionmnist", "label", 100): {"fedavg": (85.58, 86.27), "fedprox": (85.14, 85.78),
                                     "fedadam": (85.91, 87.18), "fedyogi": (85.32, 86.40)},
    ("mnist", "mixed", 100): {"fedavg": (85.62, 88.32), "fedprox": (83.30, 86.92),
                              "fedadam": (84.19, 86.26), "fedyogi": (83.32, 84.79)},
    ("mnist", "feature", 100): {"fedavg": (89.88, 91.37), "fedprox": (90.62, 90.83),
                                "fedadam": (87.38, 88.24), "fedyogi": (90.27, 91.10)},
}
# Table 4: one FedAvg round on FMNIST, 10 clients, 5 participating, 3 local epochs:
# mean accuracy of (participating AVG, participating GMA, non-participating AVG, non-participating GMA)
GMA_TABLE4 = (86.97, 89.07, 75.07, 78.53)

# Privacy: WAFFLe (IEEE Access 2022) Table 3 (shadow-model MIA, LeNet on CIFAR-10, 1000 samples per client,
# in %, mean ± spread) and Table 4 (MI-FACE on FMNIST: PSNR in dB, attack accuracy in %; evaluation
# classifier 96.67 %), and GMA (TMLR 2023) App. F (logistic attacker on the global model's logits,
# CIFAR-10 ResNet, in %). Key: (what, method label, attack, metric, scale of ours, view attacked);
# value: (number, spread or None).
PRIVACY_PAPERS = {
    ("WAFFLe Table 3: FedAvg, shadow MIA accuracy (%)", "fedavg", "shadow", "accuracy", 100, "message"): (83.85, 1.62),
    ("WAFFLe Table 3: FedAvg, shadow MIA F1 (%)", "fedavg", "shadow", "f1", 100, "message"): (83.72, 2.19),
    ("WAFFLe Table 3: WAFFLe, shadow MIA accuracy (%)", "waffle_ibp", "shadow", "accuracy", 100, "message"): (56.20, 1.40),
    ("WAFFLe Table 3: WAFFLe, shadow MIA F1 (%)", "waffle_ibp", "shadow", "f1", 100, "message"): (54.39, 1.85),
    ("WAFFLe Table 4: FedAvg, inversion PSNR (dB)", "fedavg", "inversion", "psnr", 1, "message"): (12.46, None),
    ("WAFFLe Table 4: FedAvg, inversion attack accuracy (%)", "fedavg", "inversion", "attack_accuracy", 100,
     "message"): (60.63, None),
    ("WAFFLe Table 4: WAFFLe, inversion PSNR (dB)", "waffle_ibp", "inversion", "psnr", 1, "message"): (10.22, None),
    ("WAFFLe Table 4: WAFFLe, inversion attack accuracy (%)", "waffle_ibp", "inversion", "attack_accuracy", 100,
     "message"): (40.78, None),
    ("GMA App. F: AVG, logit MIA accuracy (%)", "fedavg", "logit", "accuracy", 100, "server"): (57.0, None),
    ("GMA App. F: GMA, logit MIA accuracy (%)", "gma", "logit", "accuracy", 100, "server"): (55.0, None),
}
WAFFLE_IBP_EVALUATOR_ACC = 96.67   # Table 4's evaluation classifier (%)
