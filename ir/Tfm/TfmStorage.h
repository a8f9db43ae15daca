#ifndef KVJIT_IR_TFM_TFMSTORAGE_H_
#define KVJIT_IR_TFM_TFMSTORAGE_H_

#include "ir/Tfm/TfmAttrs.h"
#include "runtime/quant/StorageType.h"

namespace kvjit::tfm {

// The IR's storage attribute and the runtime's storage type name the same
// GGUF tensor types; these convert between them.
quant::StorageType ToQuantStorage(StorageType storage);
StorageType FromQuantStorage(quant::StorageType storage);

}  // namespace kvjit::tfm

#endif  // KVJIT_IR_TFM_TFMSTORAGE_H_
