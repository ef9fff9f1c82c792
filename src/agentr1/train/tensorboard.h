// agentr1/train/tensorboard.h — TensorBoard event files, written without TensorFlow:
// scalars and text summaries (trainer.logger: tensorboard).
//
//   TensorBoardWriter tb(run.file("tensorboard"));   // nothing on disk until the first write
//   tb.scalars(step, {{"critic/score/mean", 0.4}});  // one event, one value per metric
//   tb.text("trajectories/sample", step, markdown);  // TensorBoard's text plugin
//   tb.flush();                                      // a live TensorBoard sees the step
//
// File: <dir>/events.out.tfevents.<unix seconds>.<hostname>.<pid>[.<k> for a second file
// of this process in the same second], a sequence of
// TFRecords, each: uint64 length (little endian), uint32 masked CRC32C of those 8 bytes,
// the data, uint32 masked CRC32C of the data. The data of each record is an Event
// protobuf, encoded here by hand (field numbers of TensorFlow's event.proto,
// summary.proto, tensor.proto); the first record carries file_version "brain.Event:2".
// tests/ref/tb_events_read.py reads such a file independently (python3-protobuf).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>

namespace agentr1::train {

// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78) of n bytes; crc32c("123456789")
// = 0xE3069283.
uint32_t crc32c(const void* data, size_t n);
// TFRecord's mask of a CRC: ((crc >> 15) | (crc << 17)) + 0xa282ead8.
uint32_t mask_crc32c(uint32_t crc);
// One TFRecord: length, masked CRC of the length, data, masked CRC of the data.
std::string tfrecord(const std::string& data);

class TensorBoardWriter {
 public:
  // dir: where the event file goes (created, with parents, at the first write; a
  // writer that is never written to leaves no trace).
  explicit TensorBoardWriter(std::string dir);
  ~TensorBoardWriter();
  TensorBoardWriter(const TensorBoardWriter&) = delete;
  TensorBoardWriter& operator=(const TensorBoardWriter&) = delete;

  // One Event at `step` holding one simple_value (float32) per entry. Throws Error naming
  // the file when the write fails.
  void scalars(int64_t step, const std::map<std::string, double>& values);
  void scalar(const std::string& tag, int64_t step, double value);
  // One Event holding a scalar string tensor (DT_STRING) tagged for the text plugin,
  // which renders it as markdown.
  void text(const std::string& tag, int64_t step, const std::string& markdown);
  // A resumed run: an Event at `step` holding SessionLog{status: START}. TensorBoard then
  // drops the points of earlier files at steps >= `step` (what the interrupted run logged
  // after its checkpoint, redone by the resumed run), as it does for TensorFlow's restarts.
  void session_start(int64_t step);
  // Hands what was written to the OS (no fsync), so a running TensorBoard reads it.
  void flush();
  // The event file; "" before the first write.
  const std::string& path() const { return path_; }

 private:
  void write_event(const std::string& event);
  std::string dir_;
  std::string path_;
  std::FILE* file_ = nullptr;
};

}  // namespace agentr1::train
