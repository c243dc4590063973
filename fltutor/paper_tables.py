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

# WAFFLe section IV-G-1: WAFFLe's lead over FedAvg (points of unimodal local accuracy) at Z classes per
# client. The IEEE Access text names no dataset; the ICLR submission's Fig. 7 caption says CIFAR-10.
WAFFLE_IBP_FIG7_GAP = {3: 7.20, 4: 2.74}

# WAFFLe Tables 6-7: local test accuracy against local epochs E (T = 50; multimodal also lr 0.02),
# {mode: {dataset: {method: {E: value}}}}; Table 6 is unimodal, Table 7 multimodal
WAFFLE_IBP_EPOCHS = {
    "unimodal": {"mnist": {"fedavg": {10: 92.95, 20: 93.36, 30: 93.55}, "waffle_ibp": {10: 95.10, 20: 96.32, 30: 96.43}},
                 "fashionmnist": {"fedavg": {10: 85.32, 20: 85.13, 30: 85.14}, "waffle_ibp": {10: 87.52, 20: 87.07, 30: 89.25}},
                 "cifar10": {"fedavg": {10: 47.40, 20: 47.60, 30: 55.39}, "waffle_ibp": {10: 64.18, 20: 71.92, 30: 74.50}}},
    "multimodal": {"mnist": {"fedavg": {10: 88.70, 20: 89.27, 30: 89.03}, "waffle_ibp": {10: 95.37, 20: 94.87, 30: 95.07}},
                   "fashionmnist": {"fedavg": {10: 86.21, 20: 86.58, 30: 86.47}, "waffle_ibp": {10: 87.03, 20: 89.15, 30: 91.33}},
                   "cifar10": {"fedavg": {10: 40.91, 20: 42.09, 30: 42.00}, "waffle_ibp": {10: 58.79, 20: 57.00, 30: 62.61}}},
}

# WAFFLe Table 8 (MNIST unimodal): the non-Bayesian ablation, L1 weight -> local test accuracy; the IBP
# itself scored 96.23 and the ablation "without L1 norm" 94.96
WAFFLE_IBP_TABLE8_L1 = {0.0: 94.96, 0.1: 94.59, 1.0: 96.03, 2.0: 95.92, 10.0: 94.24}

# WAFFLe Table 9 (MNIST multimodal): local test accuracy, {(alpha / F, F): value}
WAFFLE_IBP_TABLE9 = {(0.4, 80): 91.83, (0.4, 100): 92.70, (0.4, 150): 93.23,
                     (0.6, 80): 94.23, (0.6, 100): 94.48, (0.6, 150): 95.26,
                     (0.8, 80): 94.76, (0.8, 100): 95.15, (0.8, 150): 95.70,
                     (1.0, 80): 94.70, (1.0, 100): 94.93, (1.0, 150): 95.93}
# The same grid on MNIST unimodal, which only the ICLR submission prints (its Table 6; its Table 7 is Table 9 above)
WAFFLE_IBP_ALPHA_F_UNIMODAL = {(0.4, 80): 93.20, (0.4, 100): 94.07, (0.4, 150): 94.42,
                               (0.6, 80): 95.08, (0.6, 100): 94.48, (0.6, 150): 95.56,
                               (0.8, 80): 95.56, (0.8, 100): 95.15, (0.8, 150): 96.08,
                               (1.0, 80): 96.33, (1.0, 100): 95.63, (1.0, 150): 96.45}

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
# Tables 2-3: "average best test performance" (the best test accuracy over the rounds, mean of 4 runs, %),
# as (AVG, GMA), keyed by (dataset, skew, clients); 10 clients sampled per round.
GMA_TABLE = {
    # Table 2, label skew ("label": non-iid, 2 classes per client) and iid
    ("mnist", "label", 500): {"fedavg": (96.24, 97.36), "fedprox": (95.80, 96.55),
                              "fedadam": (97.75, 98.48), "fedyogi": (98.21, 98.38)},
    ("mnist", "label", 100): {"fedavg": (98.60, 98.75), "fedprox": (97.76, 98.64),
                              "fedadam": (98.88, 98.94), "fedyogi": (98.58, 98.82)},
    ("mnist", "label", 10): {"fedavg": (99.07, 99.09), "fedprox": (98.91, 99.08),
                             "fedadam": (98.51, 98.44), "fedyogi": (97.54, 98.74)},
    ("mnist", "iid", 500): {"fedavg": (97.14, 96.85), "fedprox": (97.27, 96.53),
                            "fedadam": (98.02, 98.80), "fedyogi": (97.49, 98.18)},
    ("mnist", "iid", 100): {"fedavg": (98.28, 98.65), "fedprox": (98.72, 98.79),
                            "fedadam": (98.94, 98.72), "fedyogi": (98.75, 98.82)},
    ("mnist", "iid", 10): {"fedavg": (99.11, 99.17), "fedprox": (99.13, 99.16),
                           "fedadam": (98.71, 98.77), "fedyogi": (98.68, 98.75)},
    ("fashionmnist", "label", 500): {"fedavg": (78.02, 78.82), "fedprox": (76.21, 77.77),
                                     "fedadam": (78.80, 81.28), "fedyogi": (78.66, 80.58)},
    ("fashionmnist", "label", 100): {"fedavg": (85.58, 86.27), "fedprox": (85.14, 85.78),
                                     "fedadam": (85.91, 87.18), "fedyogi": (85.32, 86.40)},
    ("fashionmnist", "label", 10): {"fedavg": (87.43, 88.37), "fedprox": (88.25, 88.55),
                                    "fedadam": (87.26, 87.50), "fedyogi": (87.39, 88.60)},
    ("fashionmnist", "iid", 500): {"fedavg": (83.07, 83.94), "fedprox": (83.47, 82.77),
                                   "fedadam": (85.44, 86.73), "fedyogi": (85.55, 86.42)},
    ("fashionmnist", "iid", 100): {"fedavg": (88.03, 88.43), "fedprox": (87.05, 87.46),
                                   "fedadam": (88.66, 89.16), "fedyogi": (88.63, 89.70)},
    ("fashionmnist", "iid", 10): {"fedavg": (89.35, 89.65), "fedprox": (89.92, 90.12),
                                  "fedadam": (88.66, 88.86), "fedyogi": (88.85, 89.85)},
    # Table 3, FedCMNIST: "mixed" (feature + label skew, out-of-distribution test) and "feature"
    ("mnist", "mixed", 500): {"fedavg": (84.48, 86.22), "fedprox": (83.15, 86.25),
                              "fedadam": (84.22, 87.16), "fedyogi": (84.06, 87.05)},
    ("mnist", "mixed", 100): {"fedavg": (85.62, 88.32), "fedprox": (83.30, 86.92),
                              "fedadam": (84.19, 86.26), "fedyogi": (83.32, 84.79)},
    ("mnist", "mixed", 10): {"fedavg": (86.77, 89.17), "fedprox": (86.84, 89.33),
                             "fedadam": (85.75, 89.28), "fedyogi": (86.67, 89.76)},
    ("mnist", "feature", 500): {"fedavg": (89.03, 90.12), "fedprox": (87.13, 87.15),
                                "fedadam": (87.02, 87.18), "fedyogi": (87.78, 88.44)},
    ("mnist", "feature", 100): {"fedavg": (89.88, 91.37), "fedprox": (90.62, 90.83),
                                "fedadam": (87.38, 88.24), "fedyogi": (90.27, 91.10)},
    ("mnist", "feature", 10): {"fedavg": (89.37, 90.36), "fedprox": (89.61, 90.22),
                               "fedadam": (88.39, 89.40), "fedyogi": (88.78, 89.88)},
    # Table 3, quantity skew (Dirichlet beta = 0.5), CIFAR-10
    ("cifar10", "quantity", 100): {"fedavg": (79.36, 80.61), "fedprox": (80.12, 80.88),
                                   "fedadam": (79.24, 82.95), "fedyogi": (79.81, 81.62)},
    ("cifar10", "quantity", 10): {"fedavg": (84.78, 86.28), "fedprox": (83.11, 84.42),
                                  "fedadam": (85.92, 86.58), "fedyogi": (84.98, 86.47)},
}
# Table 4: one FedAvg round on FMNIST, 10 clients, 5 participating, 3 local epochs:
# mean accuracy of (participating AVG, participating GMA, non-participating AVG, non-participating GMA)
GMA_TABLE4 = (86.97, 89.07, 75.07, 78.53)
# Table 5 (App. D.3): the same with 2 of the 10 clients taking part
GMA_TABLE5 = (89.64, 86.67, 71.57, 75.77)

# Table 10 (App. D.6): FedAvg on non-iid FMNIST, 10 clients, full participation, over the grid of App. D.4:
# client rate eta_l (columns) x server rate eta_g (rows), test accuracy (%). The extracted text also has an
# eta_l = 1.0 column at chance (10 %) everywhere, outside the stated grid; like the eta_l = 0.001 /
# eta_g = 0.01 cell, printed as "0.1", it is a run that did not learn (we read "0.1" as 10 %).
GMA_TABLE10_CLIENT_LRS = (0.001, 0.01, 0.05, 0.1)
GMA_TABLE10_SERVER_LRS = (0.01, 0.1, 1.0, 1.5, 2.0)
GMA_TABLE10 = {   # {aggregation: {server_lr: (acc at each client lr)}}
    "mean": {0.01: (10.0, 56.06, 61.66, 68.02), 0.1: (56.93, 73.66, 83.39, 85.22), 1.0: (72.69, 86.49, 87.76, 88.31),
             1.5: (77.11, 86.29, 87.82, 86.96), 2.0: (71.53, 82.42, 86.93, 87.63)},
    "gma": {0.01: (10.0, 57.72, 65.13, 72.56), 0.1: (57.51, 73.90, 83.79, 87.22), 1.0: (73.34, 87.00, 88.14, 88.40),
            1.5: (75.63, 87.04, 88.21, 88.30), 2.0: (77.59, 86.90, 87.60, 88.10)},
}
# Tables 8-9 (App. D.5, Fig. 3b-c): non-iid FMNIST, full participation, mean test accuracy over the last
# 10 rounds, as (AVG, GMA). Table 8: number of clients (1 local epoch); Table 9: local epochs (10 clients).
GMA_TABLE8 = {10: (88.1, 88.38), 50: (82.42, 83.11), 100: (74.39, 76.11), 250: (71.11, 72.87)}
GMA_TABLE9 = {3: (89.91, 91.73), 5: (85.71, 87.29), 10: (84.13, 87.11), 20: (80.27, 86.66)}
# Table 6 (App. D.2): FedAvg on 10 clients with full participation, without and with client momentum,
# as {(dataset, "iid" | "non-iid"): (AVG rho=0, GMA rho=0, AVG rho=0.9, GMA rho=0.9)}.
GMA_TABLE6 = {("mnist", "iid"): (99.01, 98.96, 99.1, 99.16), ("mnist", "non-iid"): (98.43, 98.55, 98.87, 98.9),
              ("fashionmnist", "iid"): (88.61, 88.49, 89.14, 90.52),
              ("fashionmnist", "non-iid"): (86.95, 87.8, 88.1, 88.38)}
# Table 7 (App. D.3): ResNet-18 on CIFAR-10, 10 clients, last-10-round mean, as
# {(norm, "iid" | "non-iid"): {algorithm: (AVG, GMA)}} (the caption names SCAFFOLD; the table has no column for it)
GMA_TABLE7 = {
    ("batch", "iid"): {"fedavg": (87.11, 87.42), "fedprox": (87.2, 87.52), "fedadam": (77.32, 80.65),
                       "fedyogi": (78.78, 80.55)},
    ("batch", "non-iid"): {"fedavg": (77.3, 79.9), "fedprox": (78.4, 80.2), "fedadam": (69.82, 74.05),
                           "fedyogi": (67.29, 71.51)},
    ("group", "iid"): {"fedavg": (87.3, 87.61), "fedprox": (87.18, 87.5), "fedadam": (86.9, 87.7),
                       "fedyogi": (87.53, 87.78)},
    ("group", "non-iid"): {"fedavg": (83.25, 83.66), "fedprox": (83.87, 84.4), "fedadam": (83.53, 84.84),
                           "fedyogi": (83.17, 84.55)},
}
# App. E: logistic regression on MNIST, 10 clients per round, last-10-round mean, as (AVG, GMA)
GMA_CONVEX = {"iid": (92.4, 92.5), "label": (87.0, 88.5)}

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
