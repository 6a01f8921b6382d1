#include "prenet/optimizer.hpp"

#include <algorithm>
#include <cctype>
#include <stdexcept>

namespace prenet {

// Passes counted kernel by kernel from the single-tensor updates of torch/optim (PyTorch 1.13 and 2.x), each
// in-place kernel reading its operands and writing its result, with weight decay 0:
//  sgd           p.add_(g)                                                                  3
//  sgd_momentum  buf.mul_(m) 2, buf.add_(g) 3, p.add_(buf) 3                                  8
//  adam          m.mul_ 2, m.add_(g) 3, v.mul_ 2, v.addcmul_(g, g) 3, v.sqrt() 2, / bc 2,
//                .add_(eps) 2, p.addcdiv_(m, denom) 4                                        20
//  adamw         adam plus the decoupled decay p.mul_(1 - lr * wd) 2                         22
//  rmsprop       v.mul_ 2, v.addcmul_(g, g) 3, v.sqrt() 2, .add_(eps) 2, p.addcdiv_(g, avg) 4  13
//  adagrad       s.addcmul_(g, g) 3, s.sqrt() 2, .add_(eps) 2, p.addcdiv_(g, std) 4            11
const std::vector<OptimizerSpec>& optimizers() {
    static const std::vector<OptimizerSpec> table = {
        {"sgd", "SGD without momentum (torch.optim.SGD)", 3, 1},
        {"sgd_momentum", "SGD with momentum (torch.optim.SGD, momentum > 0)", 8, 3},
        {"adam", "Adam (torch.optim.Adam)", 20, 8},
        {"adamw", "AdamW, decoupled weight decay (torch.optim.AdamW)", 22, 9},
        {"rmsprop", "RMSprop (torch.optim.RMSprop)", 13, 5},
        {"adagrad", "Adagrad (torch.optim.Adagrad)", 11, 4},
    };
    return table;
}

const OptimizerSpec& find_optimizer(std::string_view name) {
    std::string lowered(name);
    std::transform(lowered.begin(), lowered.end(), lowered.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    for (const auto& spec : optimizers()) {
        if (spec.name == lowered) return spec;
    }
    std::string msg = "unknown optimizer '" + std::string(name) + "'; known optimizers:";
    for (const auto& spec : optimizers()) msg += " " + spec.name;
    throw std::invalid_argument(msg);
}

}  // namespace prenet
